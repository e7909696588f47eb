#!/usr/bin/env bash
# CI's container step: build the Dockerfile without an image registry, then check that the image
# builds a database and serves it.
#
#   bash scripts/ci_container.sh
#
# 1. installs podman, buildah and debootstrap when missing;
# 2. makes a Debian bookworm base image (python3 is 3.11 there) with debootstrap from the mirror
#    apt uses, once: it is reused while it exists (TEXTFLIX_CI_BASE);
# 3. builds the Dockerfile on it with buildah (chroot isolation, host network), torch from the
#    local wheel directory pip's configuration names, pip's CA bundle mounted for the build;
# 4. checks the image: not root, a HEALTHCHECK, /app/data a volume, no pip cache, no compiler;
# 5. in a container of the image, `textflix build` on a tiny profile from the shared IMDB
#    archive (mounted read-only), then `textflix serve` on a free loopback port, and from
#    outside: GET /api/health, the image's own HEALTHCHECK command, the dashboard, a title page,
#    POST /api/predict without the token (401) and with it (200), with explanations;
# 6. with TEXTFLIX_TEST_POSTGRES_URL set (CI sets it): `textflix build` into a schema of its own
#    on that PostgreSQL, two containers serving it (data read-only, one token), and reviews
#    posted to either show on both (README, "Running several servers").
# Everything it starts is stopped and removed on exit; the base and the built image stay
# (localhost/textflix:ci; `podman images` shows its size). Any failed check exits non-zero.
# `podman run` does not work on these machines (cgroups v1, RLIMIT_NOFILE), so containers
# are run with `buildah run`; Docker users run the same image with `docker run` (README).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

IMAGE=${TEXTFLIX_CI_IMAGE:-localhost/textflix:ci}
BASE=${TEXTFLIX_CI_BASE:-localhost/textflix-base:bookworm}
CACHE=${TEXTFLIX_CI_CACHE:-/var/tmp/textflix-ci}
SHARED=${TEXTFLIX_SHARED_DATA:-$ROOT/../shared/data}

step() { printf '\n== [%3ds] %s\n' "$SECONDS" "$*"; }
fail() { printf '\ncontainer check FAILED: %s\n' "$*" >&2; exit 1; }
trap 'printf "\ncontainer check FAILED: line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

# --- 1. tools ------------------------------------------------------------------------------
step "tools: podman, buildah, debootstrap"
export DEBIAN_FRONTEND=noninteractive PATH=$PATH:/usr/sbin:/sbin
if ! command -v podman >/dev/null || ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq podman buildah debootstrap >/dev/null
fi
mkdir -p "$CACHE"
# Without this, every container asks for an RLIMIT_NOFILE that these machines refuse.
printf '[containers]\ndefault_ulimits = []\n' >"$CACHE/containers.conf"
export CONTAINERS_CONF=$CACHE/containers.conf BUILDAH_ISOLATION=chroot
buildah --version

for file in aclImdb_v1.tar.gz movies.tsv; do
    [ -r "$SHARED/$file" ] || fail "$SHARED/$file is missing (set TEXTFLIX_SHARED_DATA)"
done

# --- 2. the base image ---------------------------------------------------------------------
debian_mirror() {
    # The first bookworm source of apt's lists, one-line (.list) or deb822 (.sources) style.
    local files=()
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 0
    awk '
        function flush() {
            if (types ~ /(^|[ \t])deb([ \t]|$)/ && suites ~ /(^|[ \t])bookworm([ \t]|$)/ && split(uris, u) > 0) print u[1]
            types = suites = uris = ""
        }
        FNR == 1 { flush() }
        /^[ \t]*#/ { next }
        /^deb[ \t]/ { line = $0; sub(/\[[^]]*\][ \t]*/, "", line); split(line, f); if (f[3] == "bookworm") print f[2]; next }
        /^Types:/ { types = substr($0, 7) }
        /^URIs:/ { uris = substr($0, 6) }
        /^Suites:/ { suites = substr($0, 8) }
        /^[ \t]*$/ { flush() }
        END { flush() }
    ' "${files[@]}" | head -1
}

if podman image exists "$BASE"; then
    step "base image: $BASE exists, reused"
else
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || fail "no Debian bookworm mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/"
    step "base image: debootstrap bookworm from $mirror"
    rootfs=$CACHE/rootfs
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; fail "debootstrap (log: $CACHE/debootstrap.log)"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/debootstrap
    # The PATH and LANG python:3.11-slim has; the Dockerfile adds the venv to PATH.
    tar -C "$rootfs" -c . | podman import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$BASE" >/dev/null
    rm -rf "$rootfs"
fi

# --- 3. the image ----------------------------------------------------------------------------
# torch: the release pyproject.toml pins, as the local CPU wheel only (+cpu is on no index, so
# a missing wheel fails here instead of fetching gigabytes of CUDA wheels).
torch=$(sed -n 's/.*"torch==\([^"]*\)".*/\1/p' pyproject.toml | head -1)
[ -n "$torch" ] || fail "no torch==VERSION pin in pyproject.toml"
pip_config() { python3 -m pip config list 2>/dev/null | sed -n "s/^[^.]*\.$1='\(.*\)'\$/\1/p"; }
wheels=
for dir in ${TEXTFLIX_TORCH_WHEELS:-} $(pip_config find-links) ${PIP_FIND_LINKS:-}; do
    if compgen -G "$dir/torch-$torch+cpu-*.whl" >/dev/null; then wheels=$dir; break; fi
done
[ -n "$wheels" ] || fail "no torch-$torch+cpu wheel in pip's find-links (or TEXTFLIX_TORCH_WHEELS)"
cert=${PIP_CERT:-$(pip_config cert | head -1)}
cert=${cert:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$cert" ] || fail "pip's CA bundle $cert is not readable"

old_image=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
step "image: buildah bud -t $IMAGE (base $BASE, torch $torch+cpu from $wheels)"
build_start=$SECONDS
buildah bud --isolation chroot --format docker --pull=never --layers \
    --build-arg BASE_IMAGE="$BASE" \
    --build-arg TORCH_INDEX= --build-arg TORCH_WHEELS=/wheels --build-arg TORCH_VERSION="$torch+cpu" \
    --build-arg PIP_CERT=/run/pip-ca.pem \
    -v "$wheels:/wheels:ro" -v "$cert:/run/pip-ca.pem:ro" \
    -t "$IMAGE" -f Dockerfile . 2>&1 \
    | while IFS= read -r line; do printf '[%3ds] %s\n' "$SECONDS" "$line"; done \
    || fail "buildah bud"
echo "built in $((SECONDS - build_start)) s"
new_image=$(podman image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$old_image" ] && [ "$old_image" != "$new_image" ]; then
    podman rmi "$old_image" >/dev/null 2>&1 || true  # the previous run's image, now untagged
fi
podman images --format 'table {{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' "$IMAGE"

# --- 4. the image's configuration and contents ------------------------------------------------
step "image: user, HEALTHCHECK, volume"
podman image inspect "$IMAGE" >"$CACHE/inspect.json"
healthcheck=$(python3 - "$CACHE/inspect.json" <<'EOF'
import json, sys
[image] = json.load(open(sys.argv[1]))
config = image["Config"]
user, volumes = config.get("User") or "", config.get("Volumes") or {}
health = image.get("Healthcheck") or config.get("Healthcheck")
problems = []
if user in ("", "root", "0") or user.startswith(("root:", "0:")):
    problems.append(f"runs as root (User={user!r})")
if "/app/data" not in volumes:
    problems.append(f"/app/data is not a volume (Volumes={sorted(volumes)})")
if not health or health.get("Test", [""])[0] not in ("CMD", "CMD-SHELL"):
    problems.append(f"no HEALTHCHECK (Healthcheck={health!r})")
if any(e.startswith("TEXTFLIX_API_TOKEN=") for e in config.get("Env") or []):
    problems.append("a TEXTFLIX_API_TOKEN is baked into the image")
if problems:
    sys.exit("; ".join(problems))
print(f"user {user}, volumes {sorted(volumes)}, HEALTHCHECK every {health['Interval'] // 10**9} s, "
      "no token in the image", file=sys.stderr)
test = health["Test"]
print(test[1] if test[0] == "CMD-SHELL" else " ".join(__import__("shlex").quote(a) for a in test[1:]))
EOF
) || fail "image configuration"
echo "HEALTHCHECK: $healthcheck"

ctr=
server=
servers=()
data=
stop_group() {  # a server's process group: buildah and what it started
    kill -TERM -- "-$1" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 -- "-$1" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$1" 2>/dev/null || true
}
cleanup() {
    local status=$?
    for pid in "${servers[@]}"; do stop_group "$pid"; done
    [ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
    [ -z "$data" ] || rm -rf "$data"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What a run that was killed outright left behind (its process is gone), then a container of ours.
for name in $(buildah containers --format '{{.ContainerName}}' | grep '^textflix-ci-[0-9]*$' || true); do
    kill -0 "${name#textflix-ci-}" 2>/dev/null || buildah rm "$name" >/dev/null
done
for dir in "$CACHE"/data.*; do
    if [ -d "$dir" ] && ! kill -0 "${dir##*.}" 2>/dev/null; then rm -rf "$dir"; fi
done
ctr=$(buildah from --pull=never --name "textflix-ci-$$" "$IMAGE")
uid=$(buildah run "$ctr" -- id -u)
echo "runs as uid $uid ($(buildah run "$ctr" -- id -un))"
[ "$uid" != 0 ] || fail "the container runs as root"
buildah run --user root "$ctr" -- sh -c '
    for dir in /root/.cache /home/*/.cache /tmp/pip-*; do
        [ ! -e "$dir" ] || { echo "left in the image: $dir"; exit 1; }
    done
    for tool in gcc cc c++ make; do
        ! command -v "$tool" >/dev/null || { echo "a build tool in the image: $tool"; exit 1; }
    done
    ! find /opt/venv /app /tmp /root /home -name "*.whl" | grep . || { echo "wheels left in the image"; exit 1; }' || fail "caches or build tools left in the image"
echo "no pip cache, no compiler"

# --- 5. build and serve in the container -------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=ci-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
data=$CACHE/data.$$
mkdir "$data"
chown "$uid" "$data"
# The tiny profile: 2 titles (14 reviews of at most 60 words), 24 training and 30 evaluation reviews,
# one epoch, few LIME samples, the plain recipe (the image holds no teacher checkpoint: offline, the
# default distil recipe would need MPNet's pieces installed).
buildah config \
    --env HF_HUB_OFFLINE=1 \
    --env TEXTFLIX_IMDB=/srv/imdb/aclImdb_v1.tar.gz --env TEXTFLIX_MOVIES=/srv/imdb/movies.tsv \
    --env TEXTFLIX_TITLES=2 --env TEXTFLIX_TRAIN_SIZE=24 --env TEXTFLIX_EVAL_SIZE=30 \
    --env TEXTFLIX_EPOCHS=1 --env TEXTFLIX_MAX_LENGTH=96 --env TEXTFLIX_LEARNING_CURVE="[]" \
    --env TEXTFLIX_MAX_WORDS=60 --env TEXTFLIX_LIME_SAMPLES=8 --env TEXTFLIX_WORD_LIME_SAMPLES=20 \
    --env TEXTFLIX_FAITHFULNESS_DRAWS=1 --env TEXTFLIX_RECIPE=plain \
    --env TEXTFLIX_HOST=127.0.0.1 --env TEXTFLIX_PORT="$port" \
    --env TEXTFLIX_DATA_DIR=/srv/textflix-data \
    "$ctr"
# The data directory is mounted beside /app/data, not on it: `buildah run` (1.28) mounts the image's
# own volume there too, and which of the two a run sees changes from run to run.
mounts=(-v "$data:/srv/textflix-data" -v "$SHARED/aclImdb_v1.tar.gz:/srv/imdb/aclImdb_v1.tar.gz:ro"
        -v "$SHARED/movies.tsv:/srv/imdb/movies.tsv:ro")

step "in the container: textflix build (tiny profile)"
# (progress bars: only their last state)
buildah run "${mounts[@]}" "$ctr" -- textflix build 2>&1 | awk -F'\r' '{ print $NF }' \
    || fail "textflix build in the container"

step "in the container: textflix serve on 127.0.0.1:$port"
# Its own process group, so that cleanup stops the server with everything buildah started for it.
setsid buildah run "${mounts[@]}" -e TEXTFLIX_API_TOKEN="$token" "$ctr" -- textflix serve \
    >"$CACHE/serve.log" 2>&1 &
server=$!
servers+=("$server")

step "HTTP checks from outside the container"
python3 - "$port" "$token" "$server" "$CACHE/serve.log" <<'EOF' || fail "HTTP checks (server log above)"
import json, os, re, sys, time, urllib.error, urllib.request

port, token, server, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
base = f"http://127.0.0.1:{port}"
passed = []


def request(method, path, body=None, token=None, timeout=120):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


def failed(name, detail):
    print(f"FAIL {name}: {detail}")
    print("--- server log (last lines):")
    print("".join(open(log, errors="replace").readlines()[-30:]))
    sys.exit(1)


def check(name, ok, detail):
    if not ok:
        failed(name, detail)
    passed.append(name)
    print(f"ok   {name}: {detail}")


start = time.monotonic()
while True:
    try:
        status, _, body = request("GET", "/api/health", timeout=5)
        break
    except OSError:  # not listening yet
        if not os.path.exists(f"/proc/{server}"):
            failed("server starts", "the server exited")
        if time.monotonic() - start > 300:
            failed("server starts", "no answer within 300 s")
        time.sleep(1)
print(f"ok   server starts: answered after {time.monotonic() - start:.0f} s")
health = json.loads(body)
check("GET /api/health", status == 200 and health["status"] == "ok" and all(health["models"].values()),
      f"{status} {body}")

status, kind, page = request("GET", "/")
links = sorted(set(re.findall(r'href="(/movies/tt\d+)[?"]', page)))
check("GET / (dashboard)", status == 200 and kind.startswith("text/html") and "Textflix" in page and links,
      f"{status} {kind}, {len(page):,} characters, title links {links}")

status, _, body = request("GET", "/api/movies")
titles = json.loads(body)["titles"] if status == 200 else []
check("GET /api/movies", status == 200 and len(titles) == 2, f"{status}, titles {[t['title_id'] for t in titles]}")

title = titles[0]
status, kind, page = request("GET", f"/movies/{title['title_id']}")
name = title["title"].replace("&", "&amp;").replace("'", "&#39;").replace('"', "&#34;")
check(f"GET /movies/{title['title_id']} (title page)",
      status == 200 and kind.startswith("text/html") and name in page and "review" in page,
      f"{status} {kind}, {len(page):,} characters, shows {title['title']!r}")

texts = ["A wonderful film, moving and beautifully acted. I loved every minute.",
         "Awful. The worst film I have seen in years, boring and badly acted."]
status, _, body = request("POST", "/api/predict", {"texts": texts})
check("POST /api/predict without the token", status == 401, f"{status} {body[:120]}")

status, _, body = request("POST", "/api/predict", {"texts": texts}, token=token)
results = json.loads(body).get("results", []) if status == 200 else []
ok = status == 200 and len(results) == 2 and all(
    set(r["predictions"]) == {"bert", "nbsvm"}
    and all(p["label"] in ("positive", "negative") and 0 <= p["p_positive"] <= 1 for p in r["predictions"].values())
    for r in results)
check("POST /api/predict with the token", ok,
      f"{status} " + "; ".join(" ".join(f"{m} {p['label']} {p['p_positive']:.2f}" for m, p in r["predictions"].items())
                               for r in results) if ok else body[:300])

status, _, body = request("POST", "/api/predict", {"texts": ["A wonderful film. The ending drags."], "explain": True},
                          token=token)
result = json.loads(body)["results"][0] if status == 200 else {}
sentences = result.get("sentences", [])
ok = status == 200 and len(sentences) == 2 and all(set(s["weights"]) == {"bert", "nbsvm"} for s in sentences)
check("POST /api/predict with explain", ok,
      f"{status}, sentence weights " + "; ".join(f"{s['text']!r}: bert {s['weights']['bert']:+.3f}" for s in sentences)
      if ok else body[:300])
print(f"{len(passed)} HTTP checks passed")
EOF

step "in the container: the image's HEALTHCHECK command"
buildah run -e TEXTFLIX_PORT="$port" "$ctr" -- sh -c "$healthcheck" || fail "the HEALTHCHECK command failed"
echo "HEALTHCHECK exit 0"

# --- 6. several servers on one PostgreSQL -------------------------------------------------------
if [ -z "${TEXTFLIX_TEST_POSTGRES_URL:-}" ]; then
    step "several servers on PostgreSQL: skipped (TEXTFLIX_TEST_POSTGRES_URL is not set)"
else
    stop_group "$server"  # the SQLite server is done: its CPU goes to the two below
    schema=textflix_ci_replicas
    in_container_python() { buildah run "$ctr" -- python -c "$1" "$TEXTFLIX_TEST_POSTGRES_URL" "$schema"; }
    step "in the container: an empty schema $schema in the CI PostgreSQL database"
    pg_url=$(in_container_python '
import sys
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
url, schema = sys.argv[1:]
with create_engine(url).begin() as connection:
    connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
    connection.execute(text(f"CREATE SCHEMA {schema}"))
print(make_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False))
') || fail "creating the schema (is the PostgreSQL of TEXTFLIX_TEST_POSTGRES_URL running?)"

    step "in the container: textflix build into PostgreSQL (the models of step 5 are reused)"
    buildah run "${mounts[@]}" -e TEXTFLIX_DATABASE_URL="$pg_url" "$ctr" -- textflix build 2>&1 \
        | awk -F'\r' '{ print $NF }' || fail "textflix build into PostgreSQL"

    replica_ports=()
    for replica in 1 2; do
        replica_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        step "in the container: replica $replica, textflix serve on 127.0.0.1:$replica_port, data read-only"
        setsid buildah run -v "$data:/srv/textflix-data:ro" -e TEXTFLIX_DATABASE_URL="$pg_url" -e TEXTFLIX_PORT="$replica_port" \
            -e TEXTFLIX_API_TOKEN="$token" "$ctr" -- textflix serve >"$CACHE/replica-$replica.log" 2>&1 &
        servers+=($!)
        replica_ports+=("$replica_port")
    done

    step "HTTP checks: reviews posted to either replica show on both"
    python3 - "$token" "$CACHE/replica-1.log" "$CACHE/replica-2.log" "${replica_ports[@]}" <<'PY' \
        || fail "replica checks (server logs above)"
import json, sys, time, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor

token, logs, ports = sys.argv[1], sys.argv[2:4], sys.argv[4:]
bases = [f"http://127.0.0.1:{port}" for port in ports]
POSTS = 20


def request(base, method, path, body=None, token=None, timeout=120):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(base + path, data, headers, method=method), timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def check(name, ok, detail):
    if not ok:
        print(f"FAIL {name}: {detail}")
        for log in logs:
            print(f"--- {log} (last lines):")
            print("".join(open(log, errors="replace").readlines()[-20:]))
        sys.exit(1)
    print(f"ok   {name}: {detail}")


def healthy(base):
    try:
        status, body = request(base, "GET", "/api/health", timeout=5)
        return status == 200 and json.loads(body)["status"] == "ok"
    except OSError:  # not listening yet
        return False


start = time.monotonic()
for base in bases:
    while not healthy(base):
        if time.monotonic() - start > 300:
            check("replicas start", False, f"{base} is not healthy after 300 s: {request(base, 'GET', '/api/health')}")
        time.sleep(1)
check("replicas start", True, f"both healthy after {time.monotonic() - start:.0f} s")

status, body = request(bases[0], "GET", "/api/movies")
title = json.loads(body)["titles"][0]["title_id"]
for base in bases:
    status, body = request(base, "POST", "/api/reviews", {"text": "No token. Not stored.", "title_id": title})
    check(f"POST /api/reviews without the token to {base}", status == 401, status)

texts = [f"Replica review {i}: the acting was {'superb' if i % 2 else 'dreadful'}." for i in range(POSTS)]
with ThreadPoolExecutor(POSTS) as pool:
    answers = list(pool.map(
        lambda i: request(bases[i % 2], "POST", "/api/reviews", {"text": texts[i], "title_id": title}, token=token),
        range(POSTS)))
check(f"{POSTS} reviews posted at once, to each replica in turn", all(s == 201 for s, _ in answers),
      sorted({s for s, _ in answers}))
posted = {json.loads(body)["id"]: text for (_, body), text in zip(answers, texts)}
check("each has its own id", len(posted) == POSTS, sorted(posted))

for base in bases:
    listed, page, pages = {}, 1, 1
    while page <= pages:
        status, body = request(base, "GET", f"/api/movies/{title}?per_page=100&page={page}")
        answer = json.loads(body)
        listed.update({r["id"]: r["text"] for r in answer["reviews"] if r["source"] == "user"})
        page, pages = page + 1, answer["pagination"]["pages"]
    check(f"GET /api/movies/{title} on {base}", all(listed.get(i) == t for i, t in posted.items()),
          f"lists all {POSTS}")
    shown = [request(base, "GET", f"/reviews/{i}") for i in posted]
    check(f"GET /reviews/{{id}} on {base}", all(s == 200 and posted[i] in html for i, (s, html) in zip(posted, shown)),
          f"all {POSTS} review pages show their text")
PY

    in_container_python '
import sys
from sqlalchemy import create_engine, text
url, schema = sys.argv[1:]
with create_engine(url).begin() as connection:
    connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
' || fail "dropping the schema $schema"
fi

step "container step passed: $IMAGE, $(podman images --format '{{.Size}}' "$IMAGE")"

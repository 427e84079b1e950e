"""2026-07-28 check: `server/discover` answers with the versions the server speaks and its capabilities.

"Servers MUST implement `server/discover`" (2026-07-28, lifecycle): it replaces the handshake as the
way a client learns what a server speaks and offers before its first real request (and is how a
client probes for the era at all).
"""

from mcpbench.probe import newest
from mcpbench.probe.target import ProbeTarget
from mcpbench.probe.verdicts import FAIL, NA, PASS, CheckRow
from mcpbench.protocol.versions import DISCOVER, LATEST, META_SERVER_INFO

NAME, TITLE, BOUND = "discover", "server/discover (2026-07-28)", 6.0
FIX = (f"Answer {DISCOVER} with supportedVersions (including {LATEST}) and capabilities, as the SDKs speaking {LATEST} do; "
       "a gateway must pass the method through.")


def run(target: ProbeTarget, deadline: float) -> CheckRow:
    if target.legacy:
        return newest.skip(NAME, target, deadline)
    found = newest.discovered(target, deadline)
    return judge({"status": found["status"], "ok": found["ok"], "detail": found["detail"], "result": found["result"],
                  "instance": found["instance"]})


def judge(figures: dict) -> CheckRow:
    result = figures.get("result") if isinstance(figures.get("result"), dict) else {}
    if not figures.get("ok"):
        # A server of the handshake era alone answers -32601 (or refuses the version): not a 2026-07-28 server.
        return CheckRow(NAME, NA, f"{DISCOVER} not answered (HTTP {figures.get('status')}: {figures.get('detail')}): "
                   f"the server does not speak {LATEST}", figures=figures)
    versions, capabilities = result.get("supportedVersions"), result.get("capabilities")
    info = (result.get("_meta") or {}).get(META_SERVER_INFO) if isinstance(result.get("_meta"), dict) else None
    figures["versions"], figures["capabilities"] = versions, sorted(capabilities) if isinstance(capabilities, dict) else None
    missing = [name for name, value in (("supportedVersions", isinstance(versions, list) and versions),
                                        ("capabilities", isinstance(capabilities, dict))) if not value]
    said = (f"{DISCOVER} → versions {', '.join(map(str, versions)) if isinstance(versions, list) else 'none'}; capabilities "
            f"{', '.join(sorted(capabilities)) if isinstance(capabilities, dict) else 'none'}"
            f"{'; server ' + str(info.get('name')) if isinstance(info, dict) else ''}")
    if missing:
        return CheckRow(NAME, FAIL, f"{said}: no {' and no '.join(missing)}", FIX, figures)
    if not newest.handshake_free(versions):
        return CheckRow(NAME, FAIL, f"{said}: answered, yet {LATEST} is not among the versions", FIX, figures)
    return CheckRow(NAME, PASS, said, figures=figures)

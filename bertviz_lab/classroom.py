"""Classroom mode, apart from Streamlit: the visitor's path sandbox and the address students open.

`./lab.sh app --classroom` serves the app on the local network and sets BERTVIZ_CLASSROOM=1 (`classroom_mode`).
Then a visitor (any machine but this one; ui/shell/classroom.py tells who is asking) may open only the folders under
checkpoints/ and runs/ (`visitor_folder`, everything else refused with one sentence, REFUSAL, that says nothing
of whether it exists), reads every message with the server's paths hidden (`hide_paths`), and may start a run only
while fewer than `max_runs()` train.

Also here: this machine's address on the local network, found without the internet (`lan_address`: the route
the kernel would pick, else the first private address of an interface that is up), the join address and its QR
code, and the banner that `bertviz-lab app --classroom` (and `./lab.sh app --classroom`) prints as it starts the room.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from pathlib import Path

from bertviz_lab import settings
from bertviz_lab.errors import LabError
from bertviz_lab.files import MAX_PATH_CHARS, ROOT

CLASSROOM_ENV = settings.CLASSROOM
MAX_RUNS_ENV = settings.MAX_RUNS
DEFAULT_PORT = 8501  # Streamlit's
# What a visitor reads for any folder outside checkpoints/ and runs/, whether it exists or not.
REFUSAL = "In classroom mode, visitors can open only the model folders under checkpoints/ and runs/."
# Where the route lookup points: no packet is sent (a UDP connect only picks the outgoing interface).
_ROUTE_PROBES = ("10.254.254.254", "192.168.254.254", "172.31.254.254", "8.8.8.8")
_VIRTUAL_INTERFACES = ("lo", "docker", "br-", "veth", "virbr", "vmnet", "vboxnet", "tun", "tap", "utun")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/:])/[^\s:;,'\"()]+")  # a server path left in a message


def classroom_mode() -> bool:
    """$BERTVIZ_CLASSROOM: 1 (true, yes, on) or 0 (false, no, off, unset); anything else is a ConfigError sentence,
    which the app shows in place of every page (it cannot tell whether to guard the room)."""
    return settings.flag(CLASSROOM_ENV)


def max_runs() -> int:
    """How many runs visitors may have training at once: $BERTVIZ_MAX_RUNS, 1 to 99 (default 2)."""
    return settings.whole(MAX_RUNS_ENV, 1, 99, 2)


# --- What a visitor may open ------------------------------------------------------------------------
class VisitorPathError(LabError):
    """A folder a visitor may not open; its message is always REFUSAL (no hint whether it exists)."""

    def __init__(self) -> None:
        super().__init__(REFUSAL)


def labelled_folder(text: str, roots: dict[str, Path]) -> Path | None:
    """The folder a path that starts with a root's label names ("runs/my-run" -> that root's my-run, "runs" -> the
    root itself), not yet resolved; None for any other path, an absolute one included."""
    parts = Path(text).parts
    return Path(roots[parts[0]]).joinpath(*parts[1:]) if parts and parts[0] in roots else None


def visitor_folder(text: str, roots: dict[str, Path]) -> Path:
    """The folder a visitor typed, resolved (symlinks and '..' followed), if it lies under one of
    `roots` (label -> folder, e.g. {"checkpoints": ..., "runs": ...}); raises VisitorPathError otherwise.

    A relative path starting with a root's label ("runs/my-run") means that root; any other relative
    path is read from the repository. '~' is not expanded: the server's home is not the visitor's.
    """
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_PATH_CHARS or any(ord(c) < 32 for c in text):
        raise VisitorPathError
    path = Path(text.strip())
    if not path.is_absolute():
        path = labelled_folder(text.strip(), roots) or ROOT / path
    try:
        resolved = path.resolve()
        allowed = [Path(root).resolve() for root in roots.values()]
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a name too long for the system
        raise VisitorPathError from None
    if not any(resolved.is_relative_to(root) for root in allowed):
        raise VisitorPathError
    return resolved


def hide_paths(message: str, roots: dict[str, Path]) -> str:
    """`message` as a visitor may read it: the allowed roots and the repository written relative
    ("runs/x"), and any other absolute path replaced by "a server path"."""
    # prefix -> (what replaces "prefix/", what replaces the bare prefix)
    names = {str(ROOT): ("", "the lab's folder")}
    for label, root in roots.items():
        names[str(Path(root))] = names[str(Path(root).resolve())] = (label + "/", label)
    for prefix in sorted(names, key=len, reverse=True):  # runs/ before the repository that holds it
        inside, bare = names[prefix]
        message = re.sub(re.escape(prefix) + r"(?:(/)|(?![\w.-]))",
                         lambda m, inside=inside, bare=bare: inside if m.group(1) else bare, message)
    return _ABSOLUTE_PATH.sub("a server path", message)


# --- The address students open ------------------------------------------------------------------------
def _usable(address: str) -> bool:
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def _route_address() -> str | None:
    """The source address the kernel would use towards the room (or the internet): no packet is sent."""
    for probe in _ROUTE_PROBES:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((probe, 1))
                address = s.getsockname()[0]
        except OSError:  # no route there (an offline laptop has none to the internet)
            continue
        if _usable(address):
            return address
    return None


def _interface_address() -> str | None:
    """The first private IPv4 address of an interface that is up and not a loopback or a VM bridge."""
    try:
        import psutil

        stats, addresses = psutil.net_if_stats(), psutil.net_if_addrs()
    except Exception:  # noqa: BLE001 - psutil missing or failing: no answer rather than a crash
        return None
    for name, entries in sorted(addresses.items()):
        if name.startswith(_VIRTUAL_INTERFACES) or not getattr(stats.get(name), "isup", False):
            continue
        for entry in entries:
            if entry.family == socket.AF_INET and _usable(entry.address):
                return entry.address
    return None


def lan_address() -> str | None:
    """This machine's IPv4 address on the local network, found without the internet; None if offline."""
    return _route_address() or _interface_address()


def join_url(port: int = DEFAULT_PORT, address: str | None = None) -> str | None:
    """The address students type or scan, e.g. http://192.168.1.20:8501; None without a network."""
    address = address or lan_address()
    return f"http://{address}:{port}" if address else None


@functools.lru_cache(maxsize=8)  # about 14 ms to draw: once per address, not on every rerun of every session
def qr_svg(url: str) -> str:
    """A QR code of `url` as an SVG that scales to any width (black on white, 4-module quiet zone)."""
    import segno

    return segno.make(url, error="m").svg_inline(scale=1, border=4, omitsize=True, dark="#000", light="#fff")


# --- `./lab.sh app --classroom` prints where to go ---------------------------------------------------
def port_from_args(args: list[str]) -> int:
    """The port a `streamlit run` command line asks for (--server.port N or =N), else the default."""
    port = DEFAULT_PORT
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--server.port=") else (
            args[i + 1] if arg == "--server.port" and i + 1 < len(args) else None)
        if value is not None and value.isdigit():
            port = int(value)
    return port


def banner(args: list[str], runs: int | None = None) -> str:
    """What `bertviz-lab app --classroom` prints before it starts the server (`runs`: visitors' cap on training runs
    at once, by default the one the environment sets)."""
    port = port_from_args(args)
    url = join_url(port)
    where = (f"Students open {url} (or scan the QR code in the app's sidebar)." if url else
             "No network address found: connect this machine to the room's network, then restart.")
    return (f"Classroom mode: serving the local network on port {port}.\n  {where}\n"
            f"  On this machine open http://localhost:{port} to keep the owner's controls.\n"
            f"  Visitors can train at most {max_runs() if runs is None else runs} runs at once.")


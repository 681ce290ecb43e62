"""Models from the Hugging Face Hub: a repo id ("bert-base-uncased", "org/name") to a local folder.

Only the files a model folder needs are fetched, with huggingface_hub, into the standard Hugging Face
cache (HF_HUB_CACHE, else HF_HOME/hub): config.json, a tokenizer's files, and one weights file
(model.safetensors, else pytorch_model.bin), weights last, so a download that stops midway leaves a
snapshot without weights, which `cached_models` does not list and the next `fetch` completes. A
complete snapshot opens without the network. HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE and HF_ENDPOINT
are read at each call (huggingface_hub reads them once, at import). Every failure is a
`CheckpointError` of one sentence. Torch-free: the caller hands the folder to `load_checkpoint`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from bertviz_lab import atomic, files
from bertviz_lab.errors import CheckpointError

CONFIG = "config.json"
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # in order of preference: the files load_checkpoint reads
SHARD_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                   "vocab.json", "merges.txt")
VOCABULARIES = ("vocab.txt", "tokenizer.json", "vocab.json")  # a tokenizer needs one of these
MAX_ID_CHARS = 96  # the Hub's own limit
MAX_RESTARTS = 2  # a server that restarts a file from byte 0 more often than this is given up on
TIMEOUT_S = 10  # for the file listing; huggingface_hub's own default for its metadata requests
_PART = re.compile(r"[A-Za-z0-9_.-]+")
_COMMIT = re.compile(r"[0-9a-f]{40}")
Progress = Callable[[int, int, str], None]  # (bytes done, bytes in all, the file being fetched)


@dataclass(frozen=True)
class Suggestion:
    repo_id: str
    about: str  # one line: what the model shows a learner
    size: str  # the download, roughly


SUGGESTED = (
    Suggestion("google/bert_uncased_L-2_H-128_A-2", "BERT-Tiny: 2 layers of 2 heads, every head fits on screen",
               "18 MB"),
    Suggestion("prajjwal1/bert-tiny", "the same tiny shape, a popular copy with its own card", "18 MB"),
    Suggestion("google/electra-small-discriminator", "ELECTRA: learned to spot replaced words, not to fill masks",
               "55 MB"),
    Suggestion("distilbert-base-uncased", "DistilBERT: 6 layers distilled from BERT-base", "270 MB"),
    Suggestion("bert-base-uncased", "the original BERT-base: 12 layers of 12 heads", "440 MB"),
    Suggestion("roberta-base", "RoBERTa: BERT trained longer, without next-sentence prediction", "500 MB"),
)


def looks_like_hub_id(text: object) -> bool:
    """True for "name" or "org/name" as the Hub allows them: letters, digits, - _ . in each part, at most
    96 characters, no "--" or "..", no part starting or ending with - or . (so no path like ../x)."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_ID_CHARS or "--" in text or ".." in text:
        return False
    parts = text.split("/")
    return len(parts) <= 2 and not text.endswith(".git") and all(
        _PART.fullmatch(p) and p[0] not in "-." and p[-1] not in "-." for p in parts)


def cache_dir() -> Path:
    """The Hugging Face cache as the environment names it now: HF_HUB_CACHE, else HF_HOME/hub."""
    env = os.environ
    if env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.path.expandvars(env.get("HF_HUB_CACHE") or env["HUGGINGFACE_HUB_CACHE"])).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as set now."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


def cached_folder(repo_id: str) -> Path | None:
    """The snapshot folder of `repo_id` in the cache if it holds a whole model, else None. No network."""
    if not looks_like_hub_id(repo_id):
        return None
    return _snapshot(cache_dir() / _repo_folder(repo_id))


def cached_models() -> list[str]:
    """The repo ids whose cached snapshot holds config.json, a weights file and a tokenizer."""
    try:
        entries = sorted(os.scandir(cache_dir()), key=lambda e: e.name)
    except OSError:  # no cache yet
        return []
    found = []
    for entry in entries:
        repo_id = entry.name.removeprefix("models--").replace("--", "/")
        if entry.name.startswith("models--") and looks_like_hub_id(repo_id) and _snapshot(Path(entry.path)):
            found.append(repo_id)
    return found


def repo_id_of(folder) -> str | None:
    """"org/name" for a snapshot folder of the cache (for showing it), None for any other folder."""
    parts = Path(folder).parts
    if len(parts) < 3 or parts[-2] != "snapshots" or not parts[-3].startswith("models--"):
        return None
    repo_id = parts[-3].removeprefix("models--").replace("--", "/")
    return repo_id if looks_like_hub_id(repo_id) else None


def fetch(repo_id: str, progress: Progress | None = None) -> Path:
    """The local snapshot folder of `repo_id`: from the cache if whole there, else downloaded first.

    `progress(done, total, filename)` hears the bytes of all files fetched, ending at the total.
    """
    if not looks_like_hub_id(repo_id):
        raise CheckpointError(f"{str(repo_id)[:100]!r} is not a Hugging Face Hub id (like bert-base-uncased "
                              "or org/name)")
    folder = cached_folder(repo_id)
    if folder is not None:
        return folder
    if offline():
        raise _not_cached(repo_id, "offline", "open it once while online")
    commit, sizes = _listing(repo_id)
    names = _needed(repo_id, sizes)
    _check_room(repo_id, names, sizes)
    endpoint = os.environ.get("HF_ENDPOINT") or None  # None: huggingface.co
    total, done, reported = sum(sizes.get(n) or 0 for n in names), 0, 0
    for name in names:  # the weights last: a snapshot without them is never taken for a model
        def report(got: int, before: int = done, name: str = name) -> None:
            nonlocal reported
            if progress is not None and before + got > reported:  # never backwards, even if a file restarts
                reported = before + got
                progress(reported, max(total, reported), name)

        pointer = _download(repo_id, name, commit, endpoint, sizes.get(name), report)
        done += sizes.get(name) or pointer.stat().st_size
        report(0, done)  # the file whole, also when it was in the cache already
    repo = cache_dir() / _repo_folder(repo_id)
    if commit != "main":  # huggingface_hub writes refs/main only for downloads by branch name
        atomic.write_text(repo / "refs" / "main", commit)
    folder = _snapshot(repo)
    if folder is None:
        raise CheckpointError(f"the download of {repo_id} finished but its folder in the cache is incomplete; "
                              "try again")
    return folder


# --- The cache layout: models--org--name/{refs/main, snapshots/<commit>/file -> ../../blobs/<etag>} ---
def _repo_folder(repo_id: str) -> str:
    return "models--" + repo_id.replace("/", "--")


def _snapshot(repo: Path) -> Path | None:
    """refs/main's snapshot if whole, else the newest whole one (from a download by commit)."""
    snapshots = repo / "snapshots"
    try:
        ref = (repo / "refs" / "main").read_text(encoding="utf-8")[:100].strip()
    except (OSError, UnicodeDecodeError):
        ref = ""
    try:
        others = sorted((p for p in snapshots.iterdir() if _COMMIT.fullmatch(p.name)),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    first = [snapshots / ref] if _COMMIT.fullmatch(ref) else []
    return next((s for s in first + others if _whole(s)), None)


def _whole(folder: Path) -> bool:
    """config.json, a weights file and a tokenizer, each a file (a link to a blob that is there)."""
    return all(any((folder / name).is_file() for name in group) for group in ((CONFIG,), WEIGHTS, VOCABULARIES))


# --- Talking to the Hub ----------------------------------------------------------------------------
def _listing(repo_id: str) -> tuple[str, dict[str, int | None]]:
    """The commit of main and the size of each file in it (one request)."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).model_info(
            repo_id, revision="main", files_metadata=True, timeout=TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - every failure of the library or the network is one sentence
        raise _failure(repo_id, exc) from None
    commit = info.sha if isinstance(info.sha, str) and _COMMIT.fullmatch(info.sha) else "main"
    return commit, {s.rfilename: s.size for s in info.siblings or []}


def _needed(repo_id: str, sizes: dict[str, int | None]) -> list[str]:
    """config.json, the tokenizer files there are, then one weights file; or why the repo cannot be opened."""
    weights = next((w for w in WEIGHTS if w in sizes), None)
    if weights is None:
        shards = next((s for s in SHARD_INDEXES if s in sizes), None)
        if shards:
            raise CheckpointError(f"{repo_id} keeps its weights in shards ({shards}); sharded weights are not "
                                  f"supported, only a single {' or '.join(WEIGHTS)}")
        raise CheckpointError(f"{repo_id} has no {' or '.join(WEIGHTS)} on the Hugging Face Hub (only weights "
                              "for other frameworks, or none)")
    if CONFIG not in sizes:
        raise CheckpointError(f"{repo_id} has no {CONFIG} on the Hugging Face Hub: it is not a transformers model")
    if not any(v in sizes for v in VOCABULARIES):
        raise CheckpointError(f"{repo_id} has no tokenizer on the Hugging Face Hub ({', '.join(VOCABULARIES)})")
    return [CONFIG, *(t for t in TOKENIZER_FILES if t in sizes), weights]


def _check_room(repo_id: str, names: list[str], sizes: dict[str, int | None]) -> None:
    """Refuse before downloading what could not be kept or loaded: huge text files, no disk, no memory."""
    for name in names[:-1]:
        json = name.endswith(".json") and name != "tokenizer.json"
        limit = files.MAX_JSON_BYTES if json else files.MAX_TEXT_FILE_BYTES
        if (sizes.get(name) or 0) > limit:
            raise CheckpointError(f"{repo_id}'s {name} is {files.too_big(sizes[name], limit)}")
    weights = sizes.get(names[-1]) or 0
    files.check_memory(2 * weights, f"{repo_id} ({names[-1]} of {files.describe_bytes(weights)})", CheckpointError)
    folder = cache_dir()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    needed = sum(sizes.get(n) or 0 for n in names)
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if needed > free:
        raise CheckpointError(f"{repo_id} needs {files.describe_bytes(needed)} of disk space; the Hugging Face "
                              f"cache's disk has {files.describe_bytes(free)} free")


def _download(repo_id: str, name: str, commit: str, endpoint: str | None, size: int | None,
              report: Callable[[int], None]) -> Path:
    """One file into the cache; its bytes reported as they arrive. Returns its path in the snapshot."""
    from huggingface_hub import hf_hub_download

    bar = type("Bar", (_Bar,), {"report": staticmethod(report)})
    try:
        return Path(hf_hub_download(repo_id, name, revision=commit, cache_dir=str(cache_dir()), endpoint=endpoint,
                                    tqdm_class=bar, etag_timeout=TIMEOUT_S))
    except Exception as exc:  # noqa: BLE001 - as in _listing
        got = bar.most
        if (got and (size is None or got < size)) or _cut(exc):
            what = "the connection dropped" if not got else (
                files.describe_bytes(got) + (f" of {files.describe_bytes(size)}" if size else "") + " arrived")
            raise CheckpointError(f"the download of {name} stopped midway ({what}); nothing was kept, "
                                  "try again") from None
        raise _failure(repo_id, exc, name) from None


class _Bar(tqdm):
    """The progress bar huggingface_hub draws through, drawing nothing: it passes the bytes of the file
    received so far to `report`, and gives up on a server that keeps restarting the file."""
    report: Callable[[int], None]
    most = 0  # the most bytes received, over every instance of this per-download subclass

    def __init__(self, *args, **kwargs):
        kwargs.pop("name", None)
        super().__init__(*args, **{**kwargs, "disable": True})
        self.received, self.restarts = 0, 0

    def update(self, n=1):
        if n < 0:  # the server ignored a resume and sent the file again from its start
            self.restarts += 1
            if self.restarts > MAX_RESTARTS:
                raise ConnectionError(f"the server restarted the file {self.restarts} times")
        self.received += n
        type(self).most = max(type(self).most, self.received)
        self.report(self.received)

    def update_transfer(self, n):  # network bytes of a Xet download: `update` counts the bytes written
        pass

    def set_transfer_postfix_str(self, *args, **kwargs):
        pass


def _failure(repo_id: str, exc: Exception, name: str | None = None) -> CheckpointError:
    """One sentence for what huggingface_hub or the network raised."""
    from huggingface_hub import errors as hf

    if isinstance(exc, hf.LocalEntryNotFoundError) and exc.__cause__ is not None:
        exc = exc.__cause__  # its own message is a paragraph about the cache; the cause says what failed
    if isinstance(exc, hf.OfflineModeIsEnabled):
        return _not_cached(repo_id, "offline", "open it once while online")
    if isinstance(exc, hf.GatedRepoError):
        return CheckpointError(f"{repo_id} is gated on the Hugging Face Hub: accept its terms on its page and log "
                               "in on this machine (hf auth login) first")
    if isinstance(exc, hf.RepositoryNotFoundError):
        return CheckpointError(f"the Hugging Face Hub has no model {repo_id}, or it is private and this machine is "
                               "not logged in; check the spelling")
    if isinstance(exc, hf.RevisionNotFoundError):
        return CheckpointError(f"{repo_id} has no main branch on the Hugging Face Hub")
    if isinstance(exc, hf.HfHubHTTPError) and exc.response is not None:
        what = f"{name} of {repo_id}" if name else repo_id
        return CheckpointError(f"the Hugging Face Hub answered HTTP {exc.response.status_code} for {what}; "
                               "try again later")
    if isinstance(exc, (hf.LocalEntryNotFoundError, ConnectionError, TimeoutError)) or _is_network(exc):
        return _not_cached(repo_id, _why(exc), "check the connection (or HF_ENDPOINT) and try again")
    return CheckpointError(f"fetching {name or 'the file list'} of {repo_id} from the Hugging Face Hub failed "
                           f"({_why(exc)})")


def _not_cached(repo_id: str, why: str, then: str) -> CheckpointError:
    return CheckpointError(f"{repo_id} is not in the Hugging Face cache and the Hub cannot be reached ({why}); {then}")


def _cut(exc: Exception) -> bool:
    """A response body that stopped short (the bytes of a file, the only body hf_hub_download streams)."""
    return type(exc).__name__ in ("RemoteProtocolError", "ReadError", "ReadTimeout") or str(exc).startswith(
        "Consistency check failed")


def _is_network(exc: Exception) -> bool:
    """An error of huggingface_hub's HTTP client (httpx2) while connecting or reading."""
    return type(exc).__module__.split(".")[0] in ("httpx2", "httpx", "httpcore", "h11")


def _why(exc: BaseException) -> str:
    """The exception's own words, on one short line."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(exc)[:400]).split())
    return text[:160] or type(exc).__name__

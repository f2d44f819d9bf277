"""Build logs and tracebacks cut down to what a model can act on: its own errors, with its own line numbers.

A failed torch extension build produces a few KB to MBs of text: the ninja command lines with every
include path, the compiler's diagnostics (often twice: once streamed, once inside the Python exception
that torch raises), and kbench's own frames around the call. A model needs none of the host's paths
and none of kbench's internals; it needs the first errors in the code it wrote, where they are, and the
offending line. So:

- diagnostics (`file:line:col: error: ...`, nvcc's `file(line): error: ...`) are kept when they point
  into the candidate's sources (not torch's or the system's headers), each once, with the source line
  and caret the compiler printed under it;
- paths are cut to their file name (`main.cpp:12:22`), and a diagnostic whose source line appears once in
  the candidate's Python file also names that line (`line 21 of your code`);
- a traceback keeps only the frames in the candidate's file (`candidate.py`) and the exception line;
- every text is clipped at a line boundary to a byte budget (MAX_BYTES), never in the middle of a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_BYTES = 2048  # per log section; a 5.7 KB build log had buried two errors under commands and paths
MAX_ERRORS = 8
CANDIDATE_FILE = "candidate.py"  # the name the worker gives the candidate's module file
_DIAG = re.compile(
    r"^(?P<path>[^\s:()][^:()]*?)(?::(?P<line>\d+)(?::(?P<col>\d+))?|\((?P<pline>\d+)\)):\s*"
    r"(?P<kind>fatal error|error|warning|note)\b\s*(?:#\w+-?\w*)?:?\s*(?P<msg>.*)$"
)
_SYSTEM = re.compile(r"/include/|site-packages|dist-packages|^/usr/|^/opt/")
_PATH = re.compile(r"(?<![\w.~])(?:/|~/)(?:[^\s/:'\"()<>,;]+/)+([^\s/:'\"()<>,;]+)")
_CONTEXT = re.compile(r"^\s*(\d+\s*)?\|")  # gcc/clang: "   12 |     code" and "      |   ^~~"
_SOURCE_LINE = re.compile(r"^\s*\d+\s*\|\s?(?P<code>.*)$")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Interrupt|Exit)\b:?")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.+))?$')


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    col: int
    kind: str
    message: str
    context: tuple[str, ...]

    @property
    def identity(self) -> tuple[str, int, int, str]:
        return (self.file, self.line, self.col, self.message)


def strip_paths(text: str) -> str:
    """Every absolute path cut to its last component: `/root/.cache/x/main.cpp` -> `main.cpp`."""
    return _PATH.sub(r"\1", text)


def clip(text: str, limit: int = MAX_BYTES) -> str:
    """At most `limit` UTF-8 bytes of whole lines from the start, saying how many lines were left out."""
    lines, out, used = text.splitlines(), [], 0
    for i, line in enumerate(lines):
        size = len(line.encode()) + 1
        if used + size > limit - 40:  # room for the note below
            out.append(f"... ({len(lines) - i} more lines)")
            break
        out.append(line)
        used += size
    return "\n".join(out)


def last_lines(text: str, limit: int = MAX_BYTES) -> str:
    """The last whole lines of `text` within `limit` UTF-8 bytes, saying how many earlier ones were left out."""
    lines, out, used = text.splitlines(), [], 0
    for line in reversed(lines):
        size = len(line.encode()) + 1
        if used + size > limit - 40:
            break
        out.append(line)
        used += size
    dropped = len(lines) - len(out)
    return "\n".join(([f"... ({dropped} earlier lines)"] if dropped else []) + out[::-1])


def _parse(lines: list[str]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for i, line in enumerate(lines):
        m = _DIAG.match(line.strip())
        if m is None:
            continue
        context: list[str] = []
        for follow in lines[i + 1 : i + 4]:
            if _DIAG.match(follow.strip()) or not follow.strip():
                break
            if _CONTEXT.match(follow) or (m.group("pline") and len(context) < 2):
                context.append(follow.rstrip())
        path = m.group("path")
        number = int(m.group("line") or m.group("pline"))
        found.append(
            Diagnostic(
                path, number, int(m.group("col") or 0), m.group("kind"), m.group("msg"), tuple(context)
            )
        )
    return found


def _python_line(d: Diagnostic, source: str) -> int | None:
    """The line of the candidate's Python file holding the diagnostic's source line, when it is unique."""
    for ctx in d.context:
        m = _SOURCE_LINE.match(ctx)
        code = (m.group("code") if m else ctx).strip()
        if len(code) < 4:
            continue
        hits = [i for i, text in enumerate(source.splitlines(), 1) if text.strip() == code]
        if len(hits) == 1:
            return hits[0]
    return None


def _format(d: Diagnostic, source: str) -> str:
    name = d.file.rsplit("/", 1)[-1]
    where = f"{name}:{d.line}" + (f":{d.col}" if d.col else "")
    line = _python_line(d, source) if source else None
    if line is not None:
        where += f" (line {line} of your code)"
    return "\n".join([f"{where}: {d.kind}: {strip_paths(d.message)}", *map(strip_paths, d.context)])


def compiler_errors(log: str, source: str = "", limit: int = MAX_BYTES) -> str:
    """The first compiler errors in the candidate's own sources, each once, within `limit` bytes.

    Errors inside torch's or the system's headers are kept only when the candidate's files have none
    (they are then what its code triggered). Empty when the log holds no compiler error.
    """
    errors = [d for d in _parse(log.splitlines()) if d.kind in ("error", "fatal error")]
    own = [d for d in errors if not _SYSTEM.search(d.file)]
    seen: set[tuple[str, int, int, str]] = set()
    unique = [d for d in (own or errors) if not (d.identity in seen or seen.add(d.identity))]  # type: ignore[func-returns-value]
    blocks, used = [], 0
    for d in unique[:MAX_ERRORS]:
        block = _format(d, source)
        if used + len(block.encode()) + 1 > limit - 40:
            break
        blocks.append(block)
        used += len(block.encode()) + 1
    if len(unique) > len(blocks):
        blocks.append(f"... and {len(unique) - len(blocks)} more errors")
    return "\n".join(blocks) if unique else ""


def whole_lines(text: str, cut_at: int = 2000) -> str:
    """`text` without its first line when it was cut from the end of something longer (the worker keeps
    the last 2000-4000 characters of a message), so nothing starts in the middle of a word."""
    if len(text) >= cut_at and "\n" in text:
        return text.split("\n", 1)[1]
    return text


def _frames(lines: list[str]) -> tuple[list[str], str]:
    """(the candidate's frames with their code lines, the exception line)."""
    kept: list[str] = []
    exception = ""
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if m is not None and m.group("path").rsplit("/", 1)[-1] == CANDIDATE_FILE:
            kept.append(f'  File "{CANDIDATE_FILE}", line {m.group("line")}, in {m.group("fn") or "?"}')
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if code and not _FRAME.match(lines[i + 1]) and not set(code) <= set("^~ "):
                kept.append(f"    {code}")
        elif _EXCEPTION.match(line):
            exception = line
    return kept, exception


def candidate_traceback(text: str, limit: int = MAX_BYTES) -> str:
    """A Python traceback reduced to the candidate's own frames and the exception; text that is not
    one loses its frames (kbench's and torch's code) and paths instead. Clipped to `limit` bytes."""
    lines = whole_lines(text).splitlines()
    kept, exception = _frames(lines)
    if kept:
        return clip("\n".join(["Traceback (your code's frames):", *kept, strip_paths(exception)]), limit)
    plain, skip = [], False
    for line in lines:
        if _FRAME.match(line):
            skip = True  # the frame's code line follows
            continue
        if (
            (skip and line.startswith("    "))
            or set(line.strip()) <= set("^~")
            or line.startswith("Traceback")
        ):
            skip = False
            continue
        skip = False
        plain.append(strip_paths(line))
    return clip("\n".join(plain).strip(), limit)

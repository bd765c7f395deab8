"""A request's head as the connection loop (connections.py) reads it, before http.server parses it: where it ends,
how its body is framed, and what makes it ambiguous (refused 400 there)."""
from __future__ import annotations

from tokenmath.base.errors import show


def framing(head: bytes) -> tuple[int | None, bool, bool]:
    """(Content-Length, or None when absent; whether a body may stay unread in the stream (Transfer-Encoding, or a
    Content-Length that is not one whole number); Expect: 100-continue) of a request's head."""
    lengths, odd, cont = set(), False, False
    for line in head.split(b"\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name, value = name.strip().lower(), value.strip()
        if name == b"content-length":
            if value.isdigit() and len(value) <= 18:
                lengths.add(int(value))
            else:
                odd = True
        elif name == b"transfer-encoding":
            odd = True
        elif name == b"expect" and value.lower() == b"100-continue":
            cont = True
    if len(lengths) > 1:
        odd = True
    return (lengths.pop() if len(lengths) == 1 and not odd else None), odd, cont


def head_problem(head: bytes) -> str | None:
    """What makes a request's head ambiguous (RFC 9112 5.1, 5.2, 3.2), or None: a header line with no colon, one that
    continues the previous (obsolete folding), a name with white space before its colon (`Content-Length : 12`: a
    length to one parser, to http.server's the end of the headers, its body silently ignored) or two Host headers."""
    hosts = 0
    for line in head.split(b"\n")[1:]:
        line = line.rstrip(b"\r")
        if not line:
            continue
        name, sep, _ = line.partition(b":")
        if not sep or not name:
            return f"the header line {show(line[:40].decode('latin-1'))} has no name and colon"
        if name != name.strip():
            return f"the header name {show(name[:40].decode('latin-1'))} has white space before its colon"
        hosts += name.lower() == b"host"
    if hosts > 1:
        return "it has two Host headers"
    return None


def head_end(buf: bytearray) -> int:
    """The index just past the empty line that ends a head (CRLF or bare LF), or -1."""
    ends = [i + n for i, n in ((buf.find(b"\n\r\n"), 3), (buf.find(b"\n\n"), 2)) if i >= 0]
    return min(ends) if ends else -1

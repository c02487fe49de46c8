"""Cleartext HTTP/2 with prior knowledge (h2c), the server side, with the standard library alone.

Why: rule T8 wants a pool with `appProtocol: kubernetes.io/h2c` reached over h2c, and the model-server
stand-in (`conformance.traffic.backend`) must then say that a request came over HTTP/2, as Gateway API's
echo server does on its H2C_PORT. The backend starts with `python -S` (no site-packages) so that a Pod
is up in tens of milliseconds; this module keeps it that way.

What it speaks (RFC 9113, RFC 7541): the connection preface, SETTINGS (acknowledged; the peer's
INITIAL_WINDOW_SIZE and MAX_FRAME_SIZE are read), HEADERS with CONTINUATION, padding and priority,
DATA (every byte received is given back at once with WINDOW_UPDATE on the stream and the connection),
PING, RST_STREAM, GOAWAY and PRIORITY; streams are answered concurrently, one thread each. HPACK is
decoded whole (static and dynamic table, size updates, Huffman strings) and answers are encoded as
literals without indexing, with no Huffman. What it does not do: server push, trailers, and flow
control of what it sends beyond the peer's initial window (its answers are small echo documents).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x4, 0x5

# RFC 7541 Appendix A.
_STATIC_NAMES = (
    ":authority :method :method :path :path :scheme :scheme :status :status :status :status :status :status "
    ":status accept-charset accept-encoding accept-language accept-ranges accept access-control-allow-origin "
    "age allow authorization cache-control content-disposition content-encoding content-language "
    "content-length content-location content-range content-type cookie date etag expect expires from host "
    "if-match if-modified-since if-none-match if-range if-unmodified-since last-modified link location "
    "max-forwards proxy-authenticate proxy-authorization range referer refresh retry-after server set-cookie "
    "strict-transport-security transfer-encoding user-agent vary via www-authenticate").split()
_STATIC_VALUES = {2: "GET", 3: "POST", 4: "/", 5: "/index.html", 6: "http", 7: "https", 8: "200", 9: "204",
                  10: "206", 11: "304", 12: "400", 13: "404", 14: "500", 16: "gzip, deflate"}
STATIC = [(name, _STATIC_VALUES.get(i, "")) for i, name in enumerate(_STATIC_NAMES, 1)]
# RFC 7541 Appendix B: the bit length of the Huffman code of each symbol 0..255, as chr(48 + bits). The
# code is canonical (codes of a length follow each other, in symbol order), so the codes follow.
_HUFFMAN_BITS = (
    "=GLLLLLLLHNLLNLLLLLLLLNLLLLLLLLL6::<=68;::8;8666555666666678?6<:=67777777777777777777777878=C=>6?5656566"
    "6577666567655677777?;>=LDFDDFFFGFGGGGGHGHHFGHGGGGEFGFGGHFEDFFGGEGFFHEFGGEEFEGFGGDFFFGFFGJJDCFGFIJJJKKJH"
    "ICEJKKJKHEEJJLKKKDHDEFEEGFFIIHHJGJKJJKKKKKLKKKKKJ")


def _huffman_codes() -> dict[tuple[int, int], int]:
    """(bits, code) -> symbol."""
    bits = [ord(c) - 48 for c in _HUFFMAN_BITS]
    codes, code, last = {}, -1, 0
    for symbol in sorted(range(256), key=lambda s: (bits[s], s)):
        code = (code + 1) << (bits[symbol] - last)
        last = bits[symbol]
        codes[(last, code)] = symbol
    return codes


_HUFFMAN = _huffman_codes()


class ProtocolError(Exception):
    """The peer broke HTTP/2 or HPACK: the connection is closed."""


def huffman_decode(data: bytes) -> bytes:
    out, code, bits = bytearray(), 0, 0
    for byte in data:
        for shift in range(7, -1, -1):
            code, bits = (code << 1) | ((byte >> shift) & 1), bits + 1
            symbol = _HUFFMAN.get((bits, code))
            if symbol is not None:
                out.append(symbol)
                code = bits = 0
            elif bits > 30:
                raise ProtocolError("invalid Huffman code")
    if bits > 7 or code != (1 << bits) - 1:  # padding: the most significant bits of EOS (all ones)
        raise ProtocolError("invalid Huffman padding")
    return bytes(out)


def encode_int(value: int, prefix: int, first: int = 0) -> bytes:
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([first | value])
    out, value = bytearray([first | limit]), value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes([*out, value])


def encode(headers: list[tuple[str, str]]) -> bytes:
    """A header block: each field a literal without indexing, its name and value raw (no Huffman)."""
    out = bytearray()
    for name, value in headers:
        n, v = name.lower().encode(), value.encode()
        out += b"\x00" + encode_int(len(n), 7) + n + encode_int(len(v), 7) + v
    return bytes(out)


class Decoder:
    """HPACK's decoding context of one connection (its dynamic table)."""

    def __init__(self, max_size: int = 4096):
        self.table: list[tuple[str, str]] = []  # newest first
        self.max_size = max_size

    def _int(self, data: bytes, pos: int, prefix: int) -> tuple[int, int]:
        limit = (1 << prefix) - 1
        value, pos, shift = data[pos] & limit, pos + 1, 0
        if value < limit:
            return value, pos
        while True:
            if pos >= len(data) or shift > 28:
                raise ProtocolError("truncated or oversized integer")
            byte, pos = data[pos], pos + 1
            value += (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, pos

    def _string(self, data: bytes, pos: int) -> tuple[str, int]:
        huffman = data[pos] & 0x80
        length, pos = self._int(data, pos, 7)
        raw = data[pos:pos + length]
        if len(raw) < length:
            raise ProtocolError("truncated string")
        return (huffman_decode(raw) if huffman else raw).decode("utf-8", "replace"), pos + length

    def _field(self, index: int) -> tuple[str, str]:
        if 0 < index <= len(STATIC):
            return STATIC[index - 1]
        if 0 <= index - len(STATIC) - 1 < len(self.table):
            return self.table[index - len(STATIC) - 1]
        raise ProtocolError(f"header index {index} out of range")

    def _evict(self) -> None:
        while sum(len(n) + len(v) + 32 for n, v in self.table) > self.max_size:
            self.table.pop()

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        out, pos = [], 0
        try:
            while pos < len(block):
                byte = block[pos]
                if byte & 0x80:  # indexed field
                    index, pos = self._int(block, pos, 7)
                    out.append(self._field(index))
                    continue
                if byte & 0xE0 == 0x20:  # dynamic table size update
                    self.max_size, pos = self._int(block, pos, 5)
                    self._evict()
                    continue
                indexing = byte & 0x40
                index, pos = self._int(block, pos, 6 if indexing else 4)
                if index:
                    name = self._field(index)[0]
                else:
                    name, pos = self._string(block, pos)
                value, pos = self._string(block, pos)
                out.append((name, value))
                if indexing:
                    self.table.insert(0, (name, value))
                    self._evict()
        except IndexError:
            raise ProtocolError("truncated header block") from None
        return out


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


# respond(headers of the request, pseudo-headers included; body) -> (status, response headers, body)
Respond = Callable[[list[tuple[str, str]], bytes], tuple[int, list[tuple[str, str]], bytes]]


class Connection:
    """One h2c connection, its preface already read: serve its streams until the peer goes."""

    def __init__(self, rfile, wfile, respond: Respond):
        self.rfile, self.wfile, self.respond = rfile, wfile, respond
        self.decoder = Decoder()
        self.lock = threading.Lock()  # one frame sequence at a time on the wire
        self.max_frame = 16384
        self.streams: dict[int, dict] = {}

    def send(self, *frames: bytes) -> None:
        with self.lock:
            self.wfile.write(b"".join(frames))

    def read_frame(self) -> tuple[int, int, int, bytes] | None:
        head = self.rfile.read(9)
        if len(head) < 9:
            return None
        length = int.from_bytes(head[:3], "big")
        payload = self.rfile.read(length)
        if len(payload) < length:
            return None
        return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload

    def serve(self) -> None:
        self.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 0x3, 100)))  # MAX_CONCURRENT_STREAMS 100
        workers: list[threading.Thread] = []
        try:
            while (got := self.read_frame()) is not None:
                kind, flags, stream, payload = got
                if kind == GOAWAY:
                    break
                if (worker := self.handle(kind, flags, stream, payload)) is not None:
                    workers.append(worker)
        except ProtocolError as e:
            self.send(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0x1) + str(e).encode()))  # PROTOCOL_ERROR
        finally:
            for worker in workers:
                worker.join(30)

    def handle(self, kind: int, flags: int, stream: int, payload: bytes) -> threading.Thread | None:
        if kind in (DATA, HEADERS) and flags & PADDED:
            payload = payload[1:len(payload) - payload[0]]
        if kind == SETTINGS and not flags & ACK:
            for i in range(0, len(payload) - 5, 6):
                key, value = struct.unpack(">HI", payload[i:i + 6])
                if key == MAX_FRAME_SIZE:
                    self.max_frame = value
            self.send(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            self.send(frame(PING, ACK, 0, payload))
        elif kind == RST_STREAM:
            self.streams.pop(stream, None)
        elif kind in (HEADERS, CONTINUATION):
            if kind == HEADERS:
                block = payload[5:] if flags & PRIORITY_FLAG else payload
                state = self.streams.setdefault(stream, {"block": bytearray(), "body": bytearray()})
                state["block"], state["ended"] = bytearray(block), bool(flags & END_STREAM)
            else:
                state = self.streams.get(stream)
                if state is None:
                    raise ProtocolError(f"CONTINUATION on stream {stream} without HEADERS")
                state["block"] += payload
            if flags & END_HEADERS:
                state["headers"] = self.decoder.decode(bytes(state["block"]))
                if state["ended"]:
                    return self.dispatch(stream)
        elif kind == DATA:
            state = self.streams.get(stream)
            if state is None:
                return None
            state["body"] += payload
            if payload:
                increment = struct.pack(">I", len(payload))
                self.send(frame(WINDOW_UPDATE, 0, 0, increment), frame(WINDOW_UPDATE, 0, stream, increment))
            if flags & END_STREAM:
                return self.dispatch(stream)
        return None

    def dispatch(self, stream: int) -> threading.Thread:
        state = self.streams.pop(stream)
        worker = threading.Thread(target=self.answer, args=(stream, state["headers"], bytes(state["body"])),
                                  daemon=True)
        worker.start()
        return worker

    def answer(self, stream: int, headers: list[tuple[str, str]], body: bytes) -> None:
        status, extra, content = self.respond(headers, body)
        block = encode([(":status", str(status)), *extra, ("content-length", str(len(content)))])
        frames = [frame(HEADERS, END_HEADERS | (0 if content else END_STREAM), stream, block)]
        for i in range(0, len(content), self.max_frame):
            last = i + self.max_frame >= len(content)
            frames.append(frame(DATA, END_STREAM if last else 0, stream, content[i:i + self.max_frame]))
        try:
            self.send(*frames)
        except OSError:
            pass

"""A static file server that honours single byte-range requests: enough to host token files for
HttpDataProvider on a LAN or on loopback (Python's http.server ignores Range)."""

import os
import re
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class RangeRequestHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        m = RANGE.match(self.headers.get("Range", ""))
        path = self.translate_path(self.path)
        if not m or not os.path.isfile(path):
            return super().do_GET()
        size = os.path.getsize(path)
        a = int(m.group(1))
        b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if a > b:
            self.send_error(416, "Requested Range Not Satisfiable")
            return
        with open(path, "rb") as f:
            f.seek(a)
            body = f.read(b - a + 1)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(body)


def serve_directory(directory, host="127.0.0.1", port=0):
    """Start serving `directory` in a background thread; returns the server (.server_address)."""
    handler = partial(RangeRequestHandler, directory=str(directory))
    server = ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

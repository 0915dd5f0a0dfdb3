#!/usr/bin/env python3
"""The training run of a profile-guided build (see scripts/build-release).

Starts `passepartout daemon` (an instrumented build) with the bundled skills
and the demo's scripted model, holds a conversation with it over TCP from a
few connections at once (greetings, a destructive command the gates block,
commands that wait for an approval, text no rule knows), then stops it with
SIGTERM so that it writes its profile as it exits.

usage: pgo-train.py EXE MANIFEST_DIR PLUGIN_DIR SCRIPT [REQUESTS]
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

TEXTS = ["hello", "free disk space", "what changed in the build?", "hi there", "list the files",
         "show the date", "why does the linker fail?"]
CONNECTIONS = 4
TIMEOUT_S = 60


def fail(message):
    print("pgo-train: " + message, file=sys.stderr)
    sys.exit(1)


def frame(text):
    return b"%06X" % len(text) + text.encode()  # the texts are ASCII: code points are bytes


def converse(port, token, count, offset, errors):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pending = b""

            def next_frame():
                nonlocal pending
                while True:
                    if len(pending) >= 6:
                        size = int(pending[:6], 16)
                        if len(pending) >= 6 + size:
                            payload, pending = pending[6:6 + size], pending[6 + size:]
                            return payload
                    chunk = conn.recv(65536)
                    if not chunk:
                        raise ConnectionError("the daemon closed the connection")
                    pending += chunk

            next_frame()  # the handshake
            for i in range(count):
                text = TEXTS[(i + offset) % len(TEXTS)]
                conn.sendall(frame('(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT "%s") '
                                   ':REQUEST-ID "%d" :AUTH "%s")' % (text, i, token)))
                while True:
                    reply = next_frame()
                    if b":TYPE :RESPONSE" in reply:
                        break
                if b":STATUS :OK" not in reply:  # a refusal would train the wrong path
                    raise ValueError("the daemon refused a request: " + reply.decode(errors="replace"))
    except (OSError, ValueError) as error:
        errors.append(str(error))


def main():
    if len(sys.argv) not in (5, 6):
        fail("usage: pgo-train.py EXE MANIFEST_DIR PLUGIN_DIR SCRIPT [REQUESTS]")
    exe, manifests, plugins, script = sys.argv[1:5]
    requests = 20000
    if len(sys.argv) == 6:
        if not sys.argv[5].isdigit() or int(sys.argv[5]) < CONNECTIONS:
            fail("REQUESTS must be a whole number of at least %d, not '%s'" % (CONNECTIONS, sys.argv[5]))
        requests = int(sys.argv[5])
    state = tempfile.mkdtemp(prefix="passepartout-pgo-train-")
    # The daemon's log goes to a file: a pipe nobody reads until the end
    # could fill up and stall the daemon mid-conversation.
    log_path = os.path.join(state, "daemon.log")

    def daemon_log():
        with open(log_path, errors="replace") as log:
            return log.read()

    daemon = None
    try:
        if not os.access(exe, os.X_OK):
            fail("%s is not an executable (build it first)" % exe)
        with open(log_path, "wb") as log:
            daemon = subprocess.Popen(
                [exe, "daemon", "--port", "0", "--socket", os.path.join(state, "daemon.sock"), "--state-dir", state,
                 "--provider", "scripted", "--script", script, "--manifests", manifests, "--plugins", plugins,
                 "--log-level", "warn"],
                stdout=subprocess.PIPE, stderr=log, env=dict(os.environ, HOME=state))
        port = None
        for line in daemon.stdout:
            text = line.decode(errors="replace")
            if text.startswith("listening on 127.0.0.1:"):
                port = int(text.rsplit(":", 1)[1])
                break
        if port is None:
            daemon.wait(timeout=TIMEOUT_S)
            fail("the daemon did not start:\n" + daemon_log())
        # Every TCP request carries the daemon's token, as the clients' do.
        with open(os.path.join(state, "token")) as token_file:
            token = token_file.readline().strip()
        errors = []
        threads = [threading.Thread(target=converse, args=(port, token, requests // CONNECTIONS, k, errors))
                   for k in range(CONNECTIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            fail("the conversation failed: " + errors[0])
        daemon.send_signal(signal.SIGTERM)
        try:
            status = daemon.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            fail("the daemon did not stop on SIGTERM")
        if status != 0:
            fail("the daemon exited with status %d:\n%s" % (status, daemon_log()))
        print("pgo-train: %d requests over %d connections" % (requests // CONNECTIONS * CONNECTIONS, CONNECTIONS))
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()

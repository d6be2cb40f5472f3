"""Log every host a Python process resolves or connects to, for tests that must stay local.

On this folder's path (``PYTHONPATH``), Python imports this module at start-up in every
process, subprocesses included (site.py's ``sitecustomize`` hook). When
``ROBOPIPE_NET_LOG`` names a file, an audit hook (PEP 578: events ``socket.getaddrinfo``
and ``socket.connect``) appends ``<event> <host> <port>`` lines to it. Unix sockets are not
logged.
"""

import os
import socket
import sys


def _log_network(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo":
        host, port = args[0], args[1]
    elif event == "socket.connect" and args[0].family in (socket.AF_INET, socket.AF_INET6):
        host, port = args[1][0], args[1][1]
    else:
        return
    path = os.environ.get("ROBOPIPE_NET_LOG")
    if path:
        if isinstance(host, bytes):
            host = host.decode()
        with open(path, "a") as log:
            log.write(f"{event} {host} {port}\n")


if not getattr(sys, "_robopipe_net_log", False):
    sys._robopipe_net_log = True
    sys.addaudithook(_log_network)

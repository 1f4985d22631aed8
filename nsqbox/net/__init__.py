"""Transport plumbing shared by the servers' edges: bytes in and out of a socket.

Nothing here knows a protocol: :mod:`nsqbox.net.rawsocket` reads a TCP socket into
a caller's parser and writes a caller's output, as cheaply as Python can.
"""

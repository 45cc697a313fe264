"""A GET over h11 with exactly the headers a test gives (Host included), for the replay's HTTP tests."""

from __future__ import annotations

import h11
import trio


async def get(
    origin: str, path: str, method: str = "GET", body: bytes = b"", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """GET (or ``method``, sending ``body``) with exactly the headers given (Host included, and
    Content-Length with a body): status, headers (last of each name), body."""
    host, port = origin.removeprefix("http://").rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        conn = h11.Connection(h11.CLIENT)
        fields = {"Host": f"{host}:{port}", "Connection": "close", **headers}
        if body:
            fields["Content-Length"] = str(len(body))
        request = h11.Request(method=method, target=path, headers=list(fields.items()))
        await stream.send_all(conn.send(request))
        if body:
            await stream.send_all(conn.send(h11.Data(data=body)))
        await stream.send_all(conn.send(h11.EndOfMessage()))
        response, received = None, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(1 << 16))
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                received += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
    assert response is not None
    found = {name.decode().lower(): value.decode() for name, value in response.headers}
    return response.status_code, found, received

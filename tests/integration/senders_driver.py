"""A process that sends an open-loop schedule from two sending processes (measure.transport.senders), for tests to signal:
`python -m tests.integration.senders_driver BASE_URL SECONDS`. It prints one JSON line when the send returns."""

import asyncio
import json
import sys

from servebook.measure.transport.client import RequestRecord, StreamRequest
from servebook.measure.transport.senders import Connection, Send, Senders

RATE = 4.0


async def send(base_url: str, seconds: float) -> None:
    sends = [Send(RequestRecord(f"load-{i}", "load", 1, "prose", 8, t_send=0.0, t_due=i / RATE),
                  StreamRequest("model", 8, prompt=list(range(1, 33)))) for i in range(int(seconds * RATE))]
    senders = Senders()
    try:
        records = await senders.send(Connection(base_url, "servebook", {}, 10.0), sends, 2)
    finally:
        senders.close()
    failed = [r for r in records if r.error is not None]
    print(json.dumps({"records": len(records), "failed": len(failed),
                      "errors": sorted({r.error for r in failed if r.error})}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(send(sys.argv[1], float(sys.argv[2])))
    except KeyboardInterrupt:
        sys.exit(130)

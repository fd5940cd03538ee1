"""How measured requests reach the engine and come back: the streaming client and its raw rows, the direct path
on asyncio's transports (SSE read by hand), routing among replicas, the endpoint, /metrics scrapes, and the
sending processes of open-loop load."""

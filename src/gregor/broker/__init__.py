"""The broker: asyncio server, request dispatch, handlers by API family."""

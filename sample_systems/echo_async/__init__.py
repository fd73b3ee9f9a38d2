"""Echo (asyncio): an asyncio TCP echo server and two pipelining client processes."""

"""What the client and server of the gRPC test share: method paths and the codec."""

SERVICE = "demo.Greeter"


def encode(text: str | bytes) -> bytes:
    # grpc.aio's server hands a unary handler's str result over already encoded
    return text if isinstance(text, bytes) else text.encode()


def decode(data: bytes) -> str:
    return data.decode()


def path(name: str) -> str:
    return f"/{SERVICE}/{name}"

"""Task pipeline: ZeroMQ ventilator -> workers -> sink (the classic PUSH/PULL fan-out)."""

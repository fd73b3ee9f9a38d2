"""Chat: a threaded TCP chat server and three scripted client processes."""

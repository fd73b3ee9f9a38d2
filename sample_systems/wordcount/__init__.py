"""Word count, map-reduce style: 3 mapper processes send partial counts early to a busy reducer.

Why this sample exists: it is the precision subject where distea's exact
happens-before and DistIA's Lamport first-receipt rule disagree. Each mapper
sends its whole partial result in one message as soon as its map phase is
done and then keeps working (statistics, a bigram table, a self-check, a
local summary). The reducer reads the mailboxes late, one after the other in
mapper order, and each result takes it many receives (one frame per
partition), so by the time it reads a message its Lamport time is already
well past the sender's. For a query on a mapper's post-send method, DistIA
sees a receive from that mapper with a later Lamport time and calls the
reducer impacted; distea sees that the message was sent before the query
ran, so nothing the query did can reach the reducer. See docs/samples.md.
"""

"""A seeded synthetic corpus: short "documents" of words drawn with Zipf-like weights.

Every mapper generates its own shard from a seed that depends only on its
index, so the corpus (and every count printed) is the same in every run.
"""

from __future__ import annotations

import random

SEED = 2016
DOCUMENTS_PER_SHARD = 150
WORDS_PER_DOCUMENT = (12, 40)

_WORDS = (
    "the of and to a in is that for it on as with by this be are from at or "
    "message process clock send receive order event impact method network "
    "server client replica leader log commit batch queue worker reducer mapper "
    "shard partition checkpoint snapshot latency throughput timeout retry "
    "failure recovery consensus quorum vote term election heartbeat lease lock "
    "transaction isolation consistency durability storage index cache page "
    "buffer socket stream channel frame header payload checksum offset "
    "sequence vector lamport causal happens before after concurrent thread "
    "schedule deadline budget trace sample profile metric counter gauge "
    "histogram query answer change function module package test benchmark"
)
VOCABULARY = tuple(_WORDS.split())
"""The words, most frequent first (stop words lead)."""


def make_shard(index: int, documents: int = DOCUMENTS_PER_SHARD) -> list[str]:
    """The documents of mapper `index`'s shard (lines of lower-case words, some punctuation)."""
    rng = random.Random(SEED * 1000 + index)
    weights = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]
    shard = []
    for _ in range(documents):
        words = rng.choices(VOCABULARY, weights, k=rng.randint(*WORDS_PER_DOCUMENT))
        if rng.random() < 0.5:
            words[0] = words[0].capitalize()
        shard.append(" ".join(words) + rng.choice((".", "!", "?", ";")))
    return shard

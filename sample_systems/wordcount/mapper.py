"""Mapper: counts the words of its shard, sends the partial result early, then keeps working.

Map phase (`load_shard`, `tokenize`, `count_words`, `partition_counts`,
`encode_partial_result`), then ONE message to the reducer
(`send_partial_result`: all partitions in a single ``sendall`` into the
reducer's mailbox for this mapper; the kernel buffers it until the reducer
gets round to it). Everything after that is local work the reducer never
hears about: `shard_statistics`, `local_top_words`, `bigram_counts`,
`verify_partitions` and `write_local_summary`. The mapper sends nothing else (its exit goes to the
launcher), so no method that first runs after the send can reach the
reducer: these are the queries on which distea and DistIA differ.
"""

from __future__ import annotations

import argparse
import itertools
import socket
from collections import Counter
from dataclasses import dataclass

from sample_systems.wordcount.corpus import DOCUMENTS_PER_SHARD, make_shard
from sample_systems.wordcount.wire import PARTITIONS, TIMEOUT_S, encode_frame, partition_of

PUNCTUATION = ".,;:!?\"'()"


@dataclass(frozen=True)
class ShardStats:
    documents: int
    tokens: int
    distinct: int
    longest: str
    rarest: str


def load_shard(index: int, documents: int) -> list[str]:
    """This mapper's documents (seeded, so the same in every run)."""
    return make_shard(index, documents)


def tokenize(document: str) -> list[str]:
    """Lower-case words without surrounding punctuation."""
    return [w for w in (t.strip(PUNCTUATION).lower() for t in document.split()) if w]


def count_words(documents: list[str]) -> Counter[str]:
    """The map step: word -> occurrences in this shard."""
    counts: Counter[str] = Counter()
    for document in documents:
        counts.update(tokenize(document))
    return counts


def partition_counts(counts: Counter[str]) -> list[dict[str, int]]:
    """Split the counts by key partition, as a map-reduce shuffle does."""
    parts: list[dict[str, int]] = [{} for _ in range(PARTITIONS)]
    for word in sorted(counts):
        parts[partition_of(word)][word] = counts[word]
    return parts


def encode_partial_result(parts: list[dict[str, int]]) -> bytes:
    """Every partition as a frame, in partition order, concatenated."""
    return b"".join(encode_frame(p, part) for p, part in enumerate(parts))


def send_partial_result(port: int, message: bytes) -> None:
    """The one message: connect to this mapper's mailbox, write everything, close.

    The reducer has not accepted yet (it is busy with earlier mailboxes); the
    connection completes in the kernel and the bytes wait in its buffers.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.sendall(message)


def shard_statistics(documents: list[str], counts: Counter[str]) -> ShardStats:
    """Local statistics, computed after the partial result has gone."""
    longest = min(counts, key=lambda w: (-len(w), w))
    rarest = min(counts, key=lambda w: (counts[w], w))
    return ShardStats(len(documents), counts.total(), len(counts), longest, rarest)


def bigram_counts(documents: list[str]) -> Counter[tuple[str, str]]:
    """Adjacent pairs of longer words: a local extra the reducer does not need."""
    pairs: Counter[tuple[str, str]] = Counter()
    for document in documents:
        words = tokenize(document)
        pairs.update((a, b) for a, b in itertools.pairwise(words)
                     if len(a) > 3 and len(b) > 3 and a != b)
    return pairs


def local_top_words(counts: Counter[str], k: int = 3) -> list[tuple[str, int]]:
    """This shard's most frequent longer words, for the local summary (ties by word)."""
    longer = [(w, n) for w, n in counts.items() if len(w) > 3]
    return sorted(longer, key=lambda item: (-item[1], item[0]))[:k]


def verify_partitions(counts: Counter[str], parts: list[dict[str, int]]) -> int:
    """Self-check of what was sent: every word in exactly one partition, totals equal."""
    seen = [word for part in parts for word in part]
    if sorted(seen) != sorted(counts) or sum(sum(p.values()) for p in parts) != counts.total():
        raise RuntimeError("partitions do not add up to the shard's counts")
    return len(seen)


def write_local_summary(name: str, stats: ShardStats, top: list[tuple[str, int]],
                        bigrams: Counter[tuple[str, str]], sent_bytes: int) -> None:
    """What this mapper did, for its transcript."""
    (a, b), n = min(bigrams.items(), key=lambda item: (-item[1], item[0]))
    print(f"{name}: {stats.documents} documents, {stats.tokens} tokens, {stats.distinct} "
          f"distinct words, longest '{stats.longest}', rarest '{stats.rarest}'")
    print(f"{name}: sent {PARTITIONS} partitions ({sent_bytes} bytes) before its own statistics")
    print(f"{name}: local top words " + ", ".join(f"{w} {c}" for w, c in top)
          + f"; most frequent bigram '{a} {b}' x{n}")


def run_mapper(name: str, index: int, port: int, shard_size: int) -> None:
    documents = load_shard(index, shard_size)
    counts = count_words(documents)
    parts = partition_counts(counts)
    message = encode_partial_result(parts)
    send_partial_result(port, message)
    # -- after the send: local work only --
    stats = shard_statistics(documents, counts)
    top = local_top_words(counts)
    bigrams = bigram_counts(documents)
    verify_partitions(counts, parts)
    write_local_summary(name, stats, top, bigrams, len(message))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--documents", type=int, default=DOCUMENTS_PER_SHARD)
    args = parser.parse_args()
    run_mapper(args.name, args.index, args.port, args.documents)


if __name__ == "__main__":
    main()

"""Reducer: one mailbox (TCP listener) per mapper, read late and in mapper order, then a report.

`open_mailboxes` binds one listener per mapper and announces the ports. The
reducer then reads the mailboxes strictly in mapper order
(`collect_partial_result`): accept mapper k's connection, read its
partitions frame by frame (`recv_frame`: a header and a payload receive each)
and `merge_partition` each into the totals. A mapper's message has usually
been waiting in the kernel for a while by then. After the last mailbox comes
the reduce-side work: `verify_totals`, `drop_stopwords`, `format_report`
(with `corpus_statistics`, `partition_balance`, `top_words` and
`length_histogram`).

The reducer sends nothing to anyone (its exit goes to the launcher), so it
can only be impacted through what the mappers sent before their own sends.
"""

from __future__ import annotations

import argparse
import socket
from collections import Counter

from sample_systems._launch import announce_ready
from sample_systems.wordcount.wire import PARTITIONS, TIMEOUT_S, recv_frame

STOPWORDS_TEXT = "the of and to a in is that for it on as with by this be are from at or"
TOP = 8


def open_mailboxes(mappers: int) -> list[socket.socket]:
    """One listener per mapper on 127.0.0.1 (OS-chosen ports)."""
    listeners = []
    for _ in range(mappers):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(TIMEOUT_S)
        listeners.append(listener)
    return listeners


def load_stopwords() -> frozenset[str]:
    """Words left out of the report."""
    return frozenset(STOPWORDS_TEXT.split())


def merge_partition(totals: Counter[str], sizes: Counter[int], partition: int,
                    counts: dict[str, int]) -> int:
    """Add one partition of one mapper's counts to the totals (and to the partition's size)."""
    totals.update(counts)
    tokens = sum(counts.values())
    sizes[partition] += tokens
    return tokens


def collect_partial_result(listener: socket.socket, totals: Counter[str],
                           sizes: Counter[int]) -> int:
    """Read one mapper's mailbox: accept, then every partition frame, in order."""
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(TIMEOUT_S)
        tokens = 0
        for expected in range(PARTITIONS):
            partition, counts = recv_frame(conn)
            if partition != expected:
                raise RuntimeError(f"partition {partition} arrived where {expected} was due")
            tokens += merge_partition(totals, sizes, partition, counts)
    listener.close()
    return tokens


def drop_stopwords(totals: Counter[str], stopwords: frozenset[str]) -> Counter[str]:
    return Counter({w: n for w, n in totals.items() if w not in stopwords})


def top_words(counts: Counter[str], k: int) -> list[tuple[str, int]]:
    """The k most frequent words, ties by word."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]


def corpus_statistics(totals: Counter[str]) -> tuple[int, int, str]:
    """(tokens, distinct words, the rarest word) over the whole corpus."""
    return totals.total(), len(totals), min(totals, key=lambda w: (totals[w], w))


def partition_balance(sizes: Counter[int]) -> tuple[int, int]:
    """(smallest, largest) partition in tokens: how even the shuffle was."""
    return min(sizes.values()), max(sizes.values())


def verify_totals(per_mapper: list[int], totals: Counter[str], sizes: Counter[int]) -> None:
    """Every token a mapper sent is in the totals, and in exactly one partition."""
    if not sum(per_mapper) == totals.total() == sizes.total():
        raise RuntimeError(f"lost tokens: {per_mapper} vs {totals.total()} vs {sizes.total()}")


def length_histogram(counts: Counter[str]) -> dict[int, int]:
    """Occurrences by word length."""
    histogram: Counter[int] = Counter()
    for word, n in counts.items():
        histogram[len(word)] += n
    return dict(sorted(histogram.items()))


def format_report(per_mapper: list[int], totals: Counter[str], sizes: Counter[int],
                  content: Counter[str]) -> list[str]:
    tokens, distinct, rarest = corpus_statistics(totals)
    smallest, largest = partition_balance(sizes)
    lines = [f"reduced {len(per_mapper)} partial results in mapper order: "
             + ", ".join(str(n) for n in per_mapper) + " tokens",
             f"corpus: {tokens} tokens, {distinct} distinct words, rarest '{rarest}' "
             f"x{totals[rarest]}",
             f"{len(sizes)} partitions of {smallest} to {largest} tokens",
             f"top {TOP} content words: "
             + ", ".join(f"{w} {n}" for w, n in top_words(content, TOP))]
    histogram = length_histogram(content)
    lines.append("content words by length: "
                 + " ".join(f"{length}:{n}" for length, n in histogram.items()))
    return lines


def reduce_mailboxes(listeners: list[socket.socket]) -> list[str]:
    stopwords = load_stopwords()
    totals: Counter[str] = Counter()
    sizes: Counter[int] = Counter()
    per_mapper = [collect_partial_result(listener, totals, sizes) for listener in listeners]
    verify_totals(per_mapper, totals, sizes)
    content = drop_stopwords(totals, stopwords)
    return format_report(per_mapper, totals, sizes, content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mappers", type=int, default=3)
    args = parser.parse_args()
    listeners = open_mailboxes(args.mappers)
    announce_ready(*(listener.getsockname()[1] for listener in listeners))
    for line in reduce_mailboxes(listeners):
        print(line)


if __name__ == "__main__":
    main()

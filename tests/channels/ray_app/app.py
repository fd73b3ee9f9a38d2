"""Ray tasks, an actor called by tasks, and a driver function -> task -> actor chain."""

import ray


def scale(x):
    return x * 10


@ray.remote
def square(x):
    return x * x


@ray.remote
class Counter:
    def __init__(self):
        self.total = 0

    def add(self, n):
        self.total = add_to(self.total, n)
        return self.total


def add_to(total, n):
    return total + n


@ray.remote
def forward(counter, x):
    """A task that calls the actor: driver -> forward -> Counter.add."""
    return ray.get(counter.add.remote(scale(x)))


@ray.remote
class Seeder:
    def seed(self):
        return 5


@ray.remote
def combine(a, b):
    """Handed the value of ``Seeder.seed``'s ref by Ray, never by ``ray.get``."""
    return a + b


def squares():
    return ray.get([square.remote(i) for i in range(3)])


def chain(counter):
    return ray.get(forward.remote(counter, 4))


def dependent():
    seeder = Seeder.remote()
    return ray.get(combine.remote(seeder.seed.remote(), 21))


def main():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        print("squares", squares())
        counter = Counter.remote()
        print("chain", chain(counter))
        print("dependent", dependent())
        print("total", ray.get(counter.add.remote(0)))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()

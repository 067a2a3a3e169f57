"""Rounds for the MQ benchmarks (mq.py, mq_amqp1.py, mqtt.py, nats.py).

Each scenario is measured `--rounds` times, decoy and the bare echo in turn, the
order reversed every other round (round 1: decoy then the echo; round 2: the echo
then decoy; ...), and each figure is the median of its rounds. A ratio is the one of
the medians; each round's own ratio is listed beside it. The correctness counts
(wrong, unanswered and mismatched replies) are not medians but the sum over the
rounds, so that one bad round still shows.
"""
import argparse
import statistics

COUNTS = ("wrong", "unanswered", "mismatched")


def order(rnd, sides):
    """The sides in the order of round `rnd` (0-based): as given, reversed every other round."""
    return list(sides) if rnd % 2 == 0 else list(reversed(sides))


def median(results):
    """The driver's results of the rounds as one: the median of each figure, the
    correctness counts summed."""
    out = {}
    for key in dict.fromkeys(k for r in results for k in r):
        values = [r.get(key) for r in results]
        if key in COUNTS:
            out[key] = sum(v or 0 for v in values)
            continue
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
        # No number in any round (a NaN percentile of no replies): as the first round had it.
        out[key] = statistics.median(numbers) if numbers else next((v for v in values if v is not None), None)
    return out


def rounds_arg(text):
    """argparse's type for --rounds: a whole number, at least 1."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"at least 1, not {n}")
    return n


def ratio(a, b):
    return a / b if a is not None and b else None


def show(r):
    return "n/a" if r is None else f"{r:.2f}"


def listed(ratios):
    """Each round's ratio, for a summary line: " (rounds 0.81 0.93 0.88)"; nothing for one round."""
    return "" if len(ratios) < 2 else " (rounds " + " ".join(show(r) for r in ratios) + ")"

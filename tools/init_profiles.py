"""Lesson 5 (C5.6): per-layer gradient norms at initialization, pre-norm against post-norm, over
5 seeds and 3 depths; the experiment, declared before it ran, as a command whose results ship.

    python tools/init_profiles.py                        # helpers.diagnostics.PROFILES
    python tools/init_profiles.py --seeds 0 --depths 3 --data-dir DIR

Declared (``helpers.diagnostics.PROFILES``): ``helpers.diagnostics.init_profile`` with its
defaults (a TransformerLM of d_model 128, 4 heads, ReLU, Xavier init, sinusoidal position, tied;
16 random sequences of 64 + 1 tokens from a vocabulary of 1000; one backward pass of the
next-token loss), float64, one CPU thread, for seeds 0-4, depths 3, 6 and 12, pre-norm and
post-norm: one curve ||dL/dW2_l|| (l = 1..L) per norm, depth and seed.

Writes ``helpers/data/init_profiles.json`` (``helpers.shipped``; read by
``helpers.diagnostics.load_init_profiles``; lesson 5 and its companion 05b load it). About 40 s of
one CPU core, more than a lesson may spend; ``tests/test_lesson05_init_profiles.py`` reruns it at
reduced size.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from helpers.diagnostics import PROFILES, init_profiles, save_init_profiles  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(PROFILES["seeds"]))
    parser.add_argument("--depths", type=int, nargs="+", default=list(PROFILES["depths"]))
    parser.add_argument("--data-dir", type=Path, default=None, help="default: helpers/data")
    args = parser.parse_args(argv)
    profiles = init_profiles(seeds=args.seeds, depths=args.depths)
    path = save_init_profiles(profiles, folder=args.data_dir)
    print(
        f"wrote {path.name}: {len(profiles.seeds)} seeds x {len(profiles.depths)} depths x 2 norms "
        f"in {profiles.seconds:.1f} s wall, {profiles.cpu_seconds:.1f} s CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A loader's place in its epochs, saved and restored across processes: what both of
robopipe's loaders (``EpochSampler`` for the map-style one, ``StreamingDataset``) share."""

from __future__ import annotations


class EpochPosition:
    """Mixin of ``seed``, ``epoch`` and ``consumed`` (batches of this epoch the training loop
    has consumed; items for a ``StreamingDataset`` without ``batch_size``), all ints, which the
    class sets in its ``__init__``. An epoch's order is a function of (seed, epoch), so these
    three integers are the whole state, whatever the dataset's size."""

    seed: int
    epoch: int
    consumed: int

    def advance(self, batches: int = 1) -> None:
        """Record that the training loop has consumed ``batches`` more batches of this epoch."""
        self.consumed += batches

    def set_epoch(self, epoch: int) -> None:
        """Make ``epoch`` the current one: from its first batch unless it already is."""
        if epoch != self.epoch:
            self.epoch, self.consumed = epoch, 0

    def state_dict(self) -> dict:
        """``{"seed", "epoch", "consumed"}`` (ints)."""
        return {"seed": self.seed, "epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        """Restore a position saved by ``state_dict()``, of a loader over the same episodes
        with the same batch size, shuffle settings and ranks (and, for a ``StreamingDataset``,
        iterated with the same ``num_workers``).

        Raises:
            KeyError: ``state`` lacks one of the three keys.
        """
        self.seed, self.epoch = int(state["seed"]), int(state["epoch"])
        self.consumed = int(state["consumed"])

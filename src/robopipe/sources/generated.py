"""v2.1 sources that a rule makes: the demo dataset (rule ``demo``) and a robomimic HDF5 file
converted to v2.1 (workflow/rules/robomimic.smk), planned by the ``plan`` checkpoint."""

from __future__ import annotations

from robopipe.demo import demo_cameras
from robopipe.layout import DEMO_DIR, ROBOMIMIC_GENERATED, ROBOMIMIC_V21_DIR
from robopipe.sources.base import ConvertedSource

# keys of a robomimic entry that are not robopipe.robomimic.to_v21.RobomimicOptions
ROBOMIMIC_NOT_OPTIONS = ("path", "generate")


class Generated(ConvertedSource):
    """A v2.1 folder that a rule makes: checked and planned once it exists."""

    def check_inputs(self) -> list[str]:
        """The folder (the rule that makes it runs first)."""
        return [self.folder]


class Demo(Generated):
    """The generated demo dataset (``demo:``, robopipe.demo.generate_demo)."""

    @property
    def folder(self) -> str:
        """``results/<name>/demo``."""
        return DEMO_DIR.format(dataset=self.name)

    def demo_options(self) -> dict:
        """The demo generator's keywords (robopipe.demo.generate_demo)."""
        options = dict(self.entry["demo"])
        options["cameras"] = demo_cameras(options.get("cameras", 2))
        return options

    def known_episodes(self) -> int | None:
        """Its configured ``episodes``."""
        return self.entry["demo"].get("episodes")


class Robomimic(Generated):
    """A robomimic HDF5 file (``robomimic: path:``, or ``generate:``d), converted to v2.1."""

    plan_stage = "robomimic"  # with the robomimic batches

    @property
    def folder(self) -> str:
        """``results/<name>/robomimic_v21``."""
        return ROBOMIMIC_V21_DIR.format(dataset=self.name)

    def hdf5(self) -> str:
        """The configured ``path``, or the generated file."""
        entry = self.entry["robomimic"]
        return entry["path"] if "path" in entry else ROBOMIMIC_GENERATED.format(dataset=self.name)

    def robomimic_options(self) -> dict:
        """robopipe.robomimic.to_v21.RobomimicOptions keywords."""
        entry = self.entry["robomimic"]
        return {k: v for k, v in entry.items() if k not in ROBOMIMIC_NOT_OPTIONS}

    def generate_options(self) -> dict:
        """The ``generate:`` keywords (robopipe.robomimic.generate)."""
        return self.entry["robomimic"]["generate"]

    def known_episodes(self) -> int | None:
        """The generated file's configured ``demos``, else None."""
        return self.entry["robomimic"].get("generate", {}).get("demos")

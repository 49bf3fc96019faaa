"""Data-centric operations on episode datasets, each a streaming Ray Data job that writes a new dataset
atomically, with its content fingerprint and lineage (``docs/data.md``): ``filter``, ``sample``, ``split``
(:mod:`.select`), ``mix`` (:mod:`.mix`), ``relabel`` (:mod:`.relabel`), ``dedup`` (:mod:`.dedup`) and
``stats`` (:mod:`.stats`, :mod:`.report`). The first pass of each is :mod:`.summary`, the writing pass
:mod:`.write`; predicates are parsed by :mod:`.expr`."""

from offlinerl.data_ops.dedup import dedup_dataset
from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.mix import MixConfig, mix_datasets
from offlinerl.data_ops.relabel import RelabelConfig, relabel_dataset
from offlinerl.data_ops.select import (FilterConfig, SampleConfig, SplitConfig, filter_dataset, sample_dataset,
                                       split_dataset)
from offlinerl.data_ops.stats import StatsConfig, dataset_card, format_card
from offlinerl.data_ops.write import OpResult

__all__ = ["DataOpError", "FilterConfig", "MixConfig", "OpResult", "RelabelConfig", "SampleConfig", "SplitConfig",
           "StatsConfig", "dataset_card", "dedup_dataset", "filter_dataset", "format_card", "mix_datasets",
           "relabel_dataset", "sample_dataset", "split_dataset"]

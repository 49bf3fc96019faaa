"""RLlib new-API-stack parquet recordings (``config.offline_data(output=...)``) → episode dataset.

``convert`` is the driver (finds files, detects the layout, runs the Ray Data
job, writes); ``columns`` + ``step_columns`` read the per-step layout,
``chunks`` + ``msgpack`` the msgpack episode layout, ``common`` builds the
per-episode output rows; ``command`` is the ``offlinerl convert rllib-parquet``
sub-command.
"""

from offlinerl.convert.rllib.convert import convert_rllib_parquet

__all__ = ["convert_rllib_parquet"]

"""Legacy RLlib SampleBatch JSON recordings (old API stack ``JsonWriter``) → episode dataset.

``convert`` is the driver; ``files`` (inputs and byte ranges), ``lines`` (one
JSON line → columns), ``stages`` (the Ray Data stages), ``layout`` (spaces and
extra columns seen in the data), ``output`` (what ``dataset.json`` records:
counts, provenance, fingerprint, lineage); ``command`` is the ``offlinerl
convert samplebatch`` sub-command.
"""

from offlinerl.convert.samplebatch.convert import SampleBatchConvertConfig, convert_samplebatch

__all__ = ["SampleBatchConvertConfig", "convert_samplebatch"]

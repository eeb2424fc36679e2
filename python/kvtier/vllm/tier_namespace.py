"""What makes an engine's rows interchangeable: the namespace a kvtier tier
keeps its records under (docs/vllm.md, "Identity").

vLLM's offload keys (a block hash and a group index) say nothing of the model,
dtype, chunk size or parallel layout that produced the bytes. vLLM's own file
tier names its directory after FileMapper's fields; kvtier takes the same
fields, from vLLM's FileMapper itself, so both tiers agree on what is
compatible, and adds the row size. A record of another namespace is never
served: the tier refuses the file (or starts it anew when asked).
"""

from __future__ import annotations

import json
from typing import Any


def row_namespace(offloading_spec: Any) -> str:
    """The namespace text of the rows `offloading_spec` describes."""
    from vllm.v1.kv_offload.file_mapper import FileMapper

    mapper = FileMapper.from_offloading_spec(
        root_dir="",
        offloading_spec=offloading_spec,
        blocks_per_file=offloading_spec.blocks_per_chunk,
        parallel_agnostic=True,
    )
    fields = dict(mapper.get_run_config())
    fields["rank"] = mapper.rank
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))

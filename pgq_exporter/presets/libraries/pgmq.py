"""pgmq 1.x: a table per queue (q_<name>, archived messages in a_<name>), listed in meta."""

from pgq_exporter.catalogue import QUEUE_DEPTH, QUEUE_LEASES
from pgq_exporter.presets.library import Detection, LibraryPreset

PRESET = LibraryPreset(
    name="pgmq",
    title="pgmq 1.x (the extension, or its SQL as the Python client installs it)",
    schema="pgmq",
    tables=("meta",),
    detection=Detection("meta", columns=("queue_name", "is_partitioned", "is_unlogged")),
    statuses=("pending", "processing", "done"),
    per_queue={"q": "q_", "a": "a_"},
    finishes=("done",),  # a message is archived (done) or deleted without a trace
    indexes={"index_read": (QUEUE_DEPTH, QUEUE_LEASES)},
    # Its own tools, for the runbooks (docs/runbooks/<preset>.md).
    remedies={
        "workers": (
            "Start or restart the consumers that `pgmq.read` the queue; "
            "`pgmq.metrics('QUEUE')` shows its length and oldest message."
        ),
        "stuck": (
            "A message read and neither deleted nor archived before its visibility timeout "
            "is visible again and will be read again: find why its reader did not finish, "
            "or give it a longer visibility timeout (`pgmq.set_vt`)."
        ),
        "failed": (
            "pgmq has no failed state: a consumer that gives up deletes or archives the message."
        ),
    },
)

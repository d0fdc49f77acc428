"""A streaming query run as its own process by test_exactly_once.py (so it can be SIGKILLed).

    python eos_job.py BOOTSTRAP INPUT OUTPUT CHECKPOINT [MASTER]

Reads INPUT from the earliest offset, 50 offsets per micro-batch, through a deliberately slow
Python UDF (so a batch is in flight long enough to be killed), and writes every record, upper
cased, to the topic OUTPUT with the exactly-once Kafka sink, until everything available at the
start has been processed (Trigger.AvailableNow). Spark tasks may be retried (local[2,8]), so
a killed Python worker fails a task attempt, not the query.
"""

from __future__ import annotations

import sys
import time

from pyspark.sql.functions import col, udf
from pyspark.sql.types import BinaryType

from gregor.spark import local_session


def _slow_upper(value):  # type: ignore[no-untyped-def]
    time.sleep(0.01)
    return value.upper()


slow_upper = udf(_slow_upper, BinaryType())


def main(
    bootstrap: str, source: str, output: str, checkpoint: str, master: str = "local[2,8]"
) -> None:
    spark = local_session(
        "exactly-once-sink-job", master=master, config={"spark.sql.shuffle.partitions": "2"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    q = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50")
        .load()
        .select("key", slow_upper(col("value")).alias("value"))
        .writeStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])

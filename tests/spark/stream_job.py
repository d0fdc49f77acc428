"""A streaming query run as its own process by test_exactly_once.py (so it can be SIGKILLed).

    python stream_job.py BOOTSTRAP TOPIC OUTPUT_DIR CHECKPOINT_DIR

Reads TOPIC from the earliest offset, 40 offsets per micro-batch, through a deliberately slow
Python UDF (so a batch is in flight long enough to be killed), into a Parquet file sink, until
everything available at the start has been processed (Trigger.AvailableNow).
"""

from __future__ import annotations

import sys
import time

from pyspark.sql.functions import col, udf
from pyspark.sql.types import StringType

from gregor.spark import local_session


def _slow_upper(value):  # type: ignore[no-untyped-def]
    time.sleep(0.02)
    return value.decode().upper()


slow_upper = udf(_slow_upper, StringType())


def main(bootstrap: str, topic: str, output: str, checkpoint: str) -> None:
    spark = local_session(
        "exactly-once-job", master="local[2]", config={"spark.sql.shuffle.partitions": "2"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    q = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .select("partition", "offset", slow_upper(col("value")).alias("value"))
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])

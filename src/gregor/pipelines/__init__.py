"""Reference data pipelines built on Gregor and Spark (see :mod:`gregor.pipelines.clickstream`)."""

"""The LeRobot v2.1 -> v3.0 conversion, one module per stage (plan, shard, aggregate, meta,
validate, publish) and the serial runner of all stages in one process."""

"""The reference queue: schema, SQL contract, producer, worker, reaper and maintenance."""

"""The Python client's side of TestCompatibility: one operation of
confluent-kafka (librdkafka) against the example broker per run, its outcome
as one JSON object on stdout, which the Go test checks.

    compat.py BOOTSTRAP version
    compat.py BOOTSTRAP produce TOPIC PARTITION ACKS CODEC IDEMPOTENT FILE
    compat.py BOOTSTRAP consume TOPIC PARTITION RACK COUNT
    compat.py BOOTSTRAP offsets TOPIC PARTITION TIMESTAMP
    compat.py BOOTSTRAP create TOPIC PARTITIONS REPLICATION_FACTOR
    compat.py BOOTSTRAP group TOPIC SECONDS
"""

import json
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 30  # seconds for any one operation


def assign_consumer(bootstrap, rack=""):
    """A consumer of assigned partitions. confluent-kafka's Consumer requires
    a group.id; offsets are neither committed nor stored, but librdkafka still
    asks for the group's coordinator once, which the broker refuses: that
    error is reported once and does not stop consumption."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
    if rack:
        conf["client.rack"] = rack
    return Consumer(conf)


def coordinator_error(err):
    return err.code() == KafkaError.INVALID_REQUEST and "FindCoordinator" in err.str()


def produce(bootstrap, topic, partition, acks, codec, idempotent, path):
    conf = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec, "linger.ms": 5}
    if idempotent == "1":
        conf["enable.idempotence"] = True
    p = Producer(conf)
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))

    with open(path, "rb") as f:
        for line in f.read().splitlines():
            p.produce(topic, value=line, partition=int(partition), on_delivery=report)
            p.poll(0)
    left = p.flush(TIMEOUT)
    if left or errors:
        return {"error": "%d undelivered; %s" % (left, "; ".join(errors[:3]))}
    return {}


def consume(bootstrap, topic, partition, rack, count):
    c = assign_consumer(bootstrap, rack)
    c.assign([TopicPartition(topic, int(partition), 0)])
    values, deadline = [], time.time() + TIMEOUT
    try:
        while len(values) < int(count) and time.time() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                if coordinator_error(m.error()):
                    continue
                return {"error": str(m.error())}
            values.append(m.value().decode())
    finally:
        c.close()
    return {"values": values}


def offsets(bootstrap, topic, partition, ts):
    c = assign_consumer(bootstrap)
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, int(partition)), timeout=TIMEOUT)
        found = c.offsets_for_times([TopicPartition(topic, int(partition), int(ts))], timeout=TIMEOUT)
    finally:
        c.close()
    if found[0].error is not None:
        return {"error": str(found[0].error)}
    return {"earliest": low, "latest": high, "byTime": found[0].offset}


def create(bootstrap, topic, partitions, rf):
    a = AdminClient({"bootstrap.servers": bootstrap})
    futures = a.create_topics([NewTopic(topic, int(partitions), int(rf))], request_timeout=TIMEOUT)
    try:
        futures[topic].result(TIMEOUT)
    except Exception as e:  # the KafkaException of the topic's error
        return {"error": str(e)}
    return {}


def group(bootstrap, topic, seconds):
    """Subscribes as a group member and waits for the first error."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat"})
    c.subscribe([topic])
    start = time.time()
    try:
        while time.time() - start < float(seconds):
            m = c.poll(0.2)
            if m is not None and m.error():
                return {"code": m.error().name(), "message": m.error().str(), "seconds": time.time() - start}
    finally:
        c.close()
    return {"seconds": time.time() - start}


def main():
    bootstrap, op, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if op == "version":
        out = {"confluentKafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0]}
    else:
        out = {"produce": produce, "consume": consume, "offsets": offsets, "create": create, "group": group}[op](bootstrap, *args)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

"""The librdkafka side of TestCrash: confluent-kafka's Producer at its
defaults (acks=all) but for enable.idempotence, writing records "rd-N" to a
topic's partitions in turn at a steady rate until its standard input closes,
then flushing for at most FLUSH seconds. Each delivery report is one JSON
line on stdout: {"p": partition, "o": offset, "v": value, "t": seconds}
once acknowledged, {"v": value, "err": why} if the record failed; the last
line is {"done": true, "produced": n, "unflushed": n, "fatal": why}, with
"fatal" only when librdkafka raised a fatal error (an idempotent producer's,
such as a sequence the brokers lost) and production stopped early.

    crash_producer.py BOOTSTRAP TOPIC PARTITIONS RATE FLUSH
"""

import json
import sys
import threading
import time

from confluent_kafka import KafkaException, Producer


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    partitions, rate, flush = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    stop = threading.Event()

    def watch():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    out = sys.stdout

    def report(err, msg):
        v = msg.value().decode()
        if err is not None:
            out.write(json.dumps({"v": v, "err": str(err)}) + "\n")
        else:
            out.write(json.dumps({"p": msg.partition(), "o": msg.offset(), "v": v, "t": time.time()}) + "\n")

    n = 0
    fatal = None
    start = time.monotonic()
    while not stop.is_set() and fatal is None:
        wait = start + n / rate - time.monotonic()
        if wait > 0:
            producer.poll(min(wait, 0.1))
            continue
        try:
            producer.produce(topic, value=b"rd-%d" % n, partition=n % partitions, on_delivery=report)
        except BufferError:  # the queue is full while acknowledgements stall
            producer.poll(0.1)
            continue
        except KafkaException as e:
            fatal = str(e)
            break
        n += 1
        producer.poll(0)
    try:
        left = producer.flush(flush)
    except KafkaException as e:
        fatal, left = fatal or str(e), len(producer)
    done = {"done": True, "produced": n, "unflushed": left}
    if fatal is not None:
        done["fatal"] = fatal
    out.write(json.dumps(done) + "\n")
    out.flush()


if __name__ == "__main__":
    main()

package gregor.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client roles: producer (plain, idempotent or transactional), consumer (classic or
 * group.protocol=consumer, subscribed or assigned), the exactly-once consume-transform-produce
 * loop, and the share consumer. Keys, values and headers travel as UTF-8 strings.
 *
 * <p>A role that waits for records polls until it has the count asked for, bounded by
 * "limit_ms" (default 120 s) so that a broken broker fails the test instead of hanging it; the
 * test asserts the records.
 */
final class Clients {
    private Clients() {}

    static Properties props(JsonNode node) {
        Properties p = new Properties();
        for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            p.put(e.getKey(), e.getValue().asText());
        }
        return p;
    }

    static byte[] bytes(JsonNode node) {
        return node == null || node.isNull() || node.isMissingNode() ? null : node.asText().getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static KafkaProducer<byte[], byte[]> producer(Properties p) {
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static ProducerRecord<byte[], byte[]> record(String topic, JsonNode r) {
        Integer partition = r.has("partition") ? r.get("partition").asInt() : null;
        Long timestamp = r.has("timestamp") ? r.get("timestamp").asLong() : null;
        ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, partition, timestamp, bytes(r.get("key")), bytes(r.get("value")));
        for (Iterator<Map.Entry<String, JsonNode>> it = r.path("headers").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> h = it.next();
            rec.headers().add(h.getKey(), bytes(h.getValue()));
        }
        return rec;
    }

    static ObjectNode json(ConsumerRecord<byte[], byte[]> r) {
        ObjectNode o = Harness.JSON.createObjectNode();
        o.put("topic", r.topic());
        o.put("partition", r.partition());
        o.put("offset", r.offset());
        o.put("timestamp", r.timestamp());
        o.put("key", text(r.key()));
        o.put("value", text(r.value()));
        ObjectNode headers = o.putObject("headers");
        for (Header h : r.headers()) {
            headers.put(h.key(), text(h.value()));
        }
        r.deliveryCount().ifPresent(n -> o.put("delivery_count", n));
        return o;
    }

    /** {"props", "topic", "records": [...], "abort": false} -> {"offsets": [[partition, offset], ...]}. */
    static JsonNode produce(JsonNode req) throws Exception {
        Properties p = props(req.path("props"));
        String topic = req.get("topic").asText();
        boolean transactional = p.containsKey("transactional.id");
        ObjectNode result = Harness.JSON.createObjectNode();
        ArrayNode offsets = result.putArray("offsets");
        try (KafkaProducer<byte[], byte[]> producer = producer(p)) {
            if (transactional) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (JsonNode r : req.path("records")) {
                sent.add(producer.send(record(topic, r)));
            }
            if (transactional) {
                if (req.path("abort").asBoolean(false)) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            } else {
                producer.flush();
            }
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get();
                offsets.addArray().add(m.partition()).add(m.offset());
            }
        }
        return result;
    }

    private static long limitNanos(JsonNode req) {
        return System.nanoTime() + req.path("limit_ms").asLong(120_000) * 1_000_000L;
    }

    private static List<TopicPartition> partitions(JsonNode assign) {
        List<TopicPartition> tps = new ArrayList<>();
        for (JsonNode tp : assign) {
            tps.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
        }
        return tps;
    }

    private static List<String> strings(JsonNode list) {
        List<String> out = new ArrayList<>();
        for (JsonNode s : list) {
            out.add(s.asText());
        }
        return out;
    }

    /**
     * {"props", "topics": [...] | "assign": [[topic, partition], ...], "count": n, "commit": true,
     * "to_end": false}; with "to_end" (assigned partitions) it reads up to the end offsets first
     * -> {"records": [...], "committed": {"topic-p": offset}, "member_id", "generation"}.
     * Subscribed consumers commit what they read (commitSync) before closing when "commit".
     */
    static JsonNode consume(JsonNode req) {
        Properties p = props(req.path("props"));
        p.putIfAbsent("auto.offset.reset", "earliest");
        int count = req.path("count").asInt();
        long limit = limitNanos(req);
        ObjectNode result = Harness.JSON.createObjectNode();
        ArrayNode records = result.putArray("records");
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            if (req.has("assign")) {
                List<TopicPartition> tps = partitions(req.get("assign"));
                c.assign(tps);
                if (!p.containsKey("group.id")) {
                    c.seekToBeginning(tps);
                }
            } else {
                c.subscribe(strings(req.get("topics")));
            }
            if (req.path("to_end").asBoolean(false)) {
                // Everything up to the end offsets as they are now (the last stable offsets
                // under read_committed): the position passes control records too.
                Map<TopicPartition, Long> ends = c.endOffsets(c.assignment());
                while (System.nanoTime() < limit && ends.entrySet().stream().anyMatch(e -> c.position(e.getKey()) < e.getValue())) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                        records.add(json(r));
                    }
                }
            }
            while (records.size() < count && System.nanoTime() < limit) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    records.add(json(r));
                }
            }
            if (p.containsKey("group.id") && req.path("commit").asBoolean(true)) {
                c.commitSync();
                ObjectNode committed = result.putObject("committed");
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(c.assignment()).entrySet()) {
                    if (e.getValue() != null) {
                        committed.put(e.getKey().toString(), e.getValue().offset());
                    }
                }
                result.put("member_id", c.groupMetadata().memberId());
                result.put("generation", c.groupMetadata().generationId());
            }
        }
        return result;
    }

    /**
     * The exactly-once loop: read "input" (read_committed, group "group"), write each value
     * upper-cased to "output" and the consumed offsets, in one transaction per poll. With
     * "abort_first", the first transaction is aborted and its records read again from the
     * committed offsets. Stops after "count" input records are committed.
     * -> {"transactions": committed, "aborted": n}.
     */
    static JsonNode consumeTransformProduce(JsonNode req) throws Exception {
        Properties cp = props(req.path("consumer"));
        cp.put("group.id", req.get("group").asText());
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        Properties pp = props(req.path("producer"));
        pp.put("transactional.id", req.get("transactional_id").asText());
        String output = req.get("output").asText();
        int count = req.get("count").asInt();
        boolean abortFirst = req.path("abort_first").asBoolean(false);
        long limit = limitNanos(req);
        int done = 0;
        int transactions = 0;
        int aborted = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(cp); KafkaProducer<byte[], byte[]> producer = producer(pp)) {
            producer.initTransactions();
            c.subscribe(List.of(req.get("input").asText()));
            while (done < count && System.nanoTime() < limit) {
                ConsumerRecords<byte[], byte[]> batch = c.poll(Duration.ofMillis(100));
                if (batch.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    byte[] v = r.value() == null ? null : text(r.value()).toUpperCase().getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(output, r.key(), v));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, c.groupMetadata());
                if (abortFirst && aborted == 0) {
                    producer.flush(); // the aborted records reach the log, then the abort marker
                    producer.abortTransaction();
                    aborted++;
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
                    for (TopicPartition tp : c.assignment()) {
                        OffsetAndMetadata o = committed.get(tp);
                        if (o != null) {
                            c.seek(tp, o.offset());
                        } else {
                            c.seekToBeginning(List.of(tp));
                        }
                    }
                    continue;
                }
                producer.commitTransaction();
                transactions++;
                done += batch.count();
            }
        }
        ObjectNode result = Harness.JSON.createObjectNode();
        result.put("transactions", transactions);
        result.put("aborted", aborted);
        result.put("records", done);
        return result;
    }

    /**
     * KafkaShareConsumer: subscribe to "topics" in share group "group", poll until "count"
     * records; each is acknowledged with "ack" (ACCEPT by default; "RELEASE_FIRST" releases
     * every record the first time it is delivered, so it comes back with delivery count 2),
     * committed with commitSync. -> {"records": [... with delivery_count]}.
     */
    static JsonNode shareConsume(JsonNode req) {
        Properties p = props(req.path("props"));
        p.put("group.id", req.get("group").asText());
        String mode = req.path("ack").asText("ACCEPT");
        if (!mode.equals("ACCEPT")) {
            p.put("share.acknowledgement.mode", "explicit");
        }
        int count = req.get("count").asInt();
        long limit = limitNanos(req);
        ObjectNode result = Harness.JSON.createObjectNode();
        ArrayNode records = result.putArray("records");
        try (KafkaShareConsumer<byte[], byte[]> c =
                new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(strings(req.get("topics")));
            while (records.size() < count && System.nanoTime() < limit) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    if (mode.equals("RELEASE_FIRST") && r.deliveryCount().orElse((short) 1) == 1) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        continue;
                    }
                    if (!mode.equals("ACCEPT")) {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    records.add(json(r));
                }
                c.commitSync();
            }
        }
        return result;
    }
}

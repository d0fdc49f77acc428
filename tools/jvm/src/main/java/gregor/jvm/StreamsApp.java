package gregor.jvm;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;

/**
 * A Kafka Streams application for the interop tests, run as a process of its own (so a test
 * can SIGKILL it): page views (value = page name) on "input" are re-keyed by page (a
 * repartition topic), counted per page in 1-minute windows of event time in a windowed state
 * store (a changelog topic), and every count update goes to "output" as key "page@windowStart",
 * value the count. exactly_once_v2; the record cache is off, so every input record makes
 * exactly one output record and a page's window counts 1, 2, ..., n on the output.
 *
 * <p>Arguments: bootstrap-servers application-id input output state-dir. It prints "STATE
 * new-state" lines on stdout and closes cleanly on SIGTERM, then prints "CLOSED true STATE" (or
 * "CLOSED false STATE" when the close did not finish within its 120 s). Streams' own INFO lines
 * (state transitions, each step of a shutdown) go to stderr, so a slow close can be read there.
 */
public final class StreamsApp {
    private StreamsApp() {}

    public static void main(String[] args) throws Exception {
        Configurator.setLevel("org.apache.kafka.streams", Level.INFO);
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((key, page) -> page, Grouped.with("by-page", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofDays(1)))
                .count(Materialized.as("counts"))
                .toStream()
                .map((window, n) -> KeyValue.pair(window.key() + "@" + window.window().start(), Long.toString(n)))
                .to(args[3], Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean done = streams.close(Duration.ofSeconds(120));
            // the client's state read after close returned: the listener's own "STATE
            // NOT_RUNNING" line may come after this one, or not at all (Streams calls the
            // listener after waking close's waiter, and the JVM halts once this hook ends)
            System.out.println("CLOSED " + done + " " + streams.state());
            System.out.flush();
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}

package gregor.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.kafka.common.utils.Exit;

/**
 * The Java side of Gregor's JVM interop tests: one long-lived JVM per test session that runs
 * the Java client roles and Kafka's own command-line tools on request.
 *
 * <p>Theory of operation. The Python test (gregor.testing.kafka.JavaHarness) writes one JSON
 * request per line on stdin: {"id": n, "op": "...", ...}. Each request runs on its own thread
 * and its answer is one JSON line on the real stdout: {"id": n, "result": ...} or {"id": n,
 * "error": "...", "trace": "..."}. System.out is sent to stderr at start, so nothing a client
 * library prints can break the protocol. The first line written is {"id": 0, "ready": true}.
 * When stdin closes (the test session ended, or it died), the JVM halts.
 *
 * <p>Kafka's tools run in this JVM (op "tool", see {@link Tools}): a JVM start per tool call
 * would cost seconds each on a small machine. Their Exit.exit is turned into an exception that
 * carries the status code, and their stdin, stdout and stderr are swapped for buffers while one
 * runs (one tool at a time).
 */
public final class Harness {
    static final ObjectMapper JSON = new ObjectMapper();
    private static PrintStream protocol;

    private Harness() {}

    public static void main(String[] args) throws Exception {
        protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
        Exit.setExitProcedure((code, message) -> {
            throw new Tools.ToolExit(code, message);
        });
        Exit.setHaltProcedure((code, message) -> {
            throw new Tools.ToolExit(code, message);
        });
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "harness-request");
            t.setDaemon(true);
            return t;
        });
        reply(JSON.createObjectNode().put("id", 0).put("ready", true));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode request = JSON.readTree(line);
            pool.execute(() -> reply(handle(request)));
        }
        Runtime.getRuntime().halt(0);
    }

    private static void reply(ObjectNode response) {
        String text;
        try {
            text = JSON.writeValueAsString(response);
        } catch (Exception e) {
            text = "{\"id\":" + response.path("id").asLong() + ",\"error\":\"unencodable answer\"}";
        }
        synchronized (Harness.class) {
            protocol.println(text);
            protocol.flush();
        }
    }

    static ObjectNode handle(JsonNode request) {
        ObjectNode response = JSON.createObjectNode();
        response.put("id", request.path("id").asLong());
        try {
            String op = request.path("op").asText();
            JsonNode result = switch (op) {
                case "tool" -> Tools.run(request);
                case "produce" -> Clients.produce(request);
                case "consume" -> Clients.consume(request);
                case "eos" -> Clients.consumeTransformProduce(request);
                case "share-consume" -> Clients.shareConsume(request);
                case "admin" -> Admin.run(request);
                default -> throw new IllegalArgumentException("unknown op " + op);
            };
            response.set("result", result);
        } catch (Throwable e) {
            response.put("error", e.getClass().getName() + ": " + e.getMessage());
            StringWriter trace = new StringWriter();
            e.printStackTrace(new PrintWriter(trace));
            response.put("trace", trace.toString());
        }
        return response;
    }
}

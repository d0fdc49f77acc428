package gregor.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;

/**
 * Runs one of Kafka's command-line tools (its main class, as Kafka's bin/ scripts name it) in
 * this JVM: {"op": "tool", "main": "org.apache.kafka.tools.TopicCommand", "args": [...],
 * "stdin": "..."} answers {"exit": code, "stdout": "...", "stderr": "..."}.
 */
final class Tools {
    private static final Object LOCK = new Object();
    /** The status of the first Exit.exit of the running tool: some tools catch what the exit
     * procedure throws and exit again with another status, the first one is the tool's. */
    private static volatile Integer firstExit;

    private Tools() {}

    /** What Exit.exit throws while a tool runs here: the tool's exit status. */
    static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code, String message) {
            super(MARK + code + (message == null ? "" : ": " + message), null, false, false);
            this.code = code;
            if (firstExit == null) {
                firstExit = code;
            }
        }
    }

    private static final String MARK = "gregor-harness-exit ";

    /** The tool's stderr without what it printed of a ToolExit it caught. */
    private static String withoutExits(String err) {
        StringBuilder out = new StringBuilder();
        for (String line : err.split("\n", -1)) {
            if (!line.contains(MARK) && !line.contains("Tools$ToolExit") && !line.contains("gregor.jvm.")) {
                out.append(line).append('\n');
            }
        }
        return out.toString().strip().isEmpty() ? "" : out.toString().stripTrailing() + "\n";
    }

    static JsonNode run(JsonNode request) throws Exception {
        String main = request.get("main").asText();
        JsonNode argList = request.path("args");
        String[] args = new String[argList.size()];
        for (int i = 0; i < args.length; i++) {
            args[i] = argList.get(i).asText();
        }
        byte[] stdin = request.path("stdin").asText("").getBytes(StandardCharsets.UTF_8);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = 0;
        synchronized (LOCK) {
            PrintStream savedOut = System.out;
            PrintStream savedErr = System.err;
            InputStream savedIn = System.in;
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(stdin));
            firstExit = null;
            try {
                Class.forName(main).getMethod("main", String[].class).invoke(null, (Object) args);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                ToolExit exit = null;
                for (Throwable t = cause; t != null && exit == null; t = t.getCause()) {
                    if (t instanceof ToolExit x) {
                        exit = x;
                    }
                }
                if (exit != null) {
                    code = exit.code;
                } else {
                    code = -1;
                    cause.printStackTrace(System.err);
                }
            } finally {
                if (firstExit != null) {
                    code = firstExit;
                }
                System.out.flush();
                System.err.flush();
                System.setOut(savedOut);
                System.setErr(savedErr);
                System.setIn(savedIn);
            }
        }
        ObjectNode result = Harness.JSON.createObjectNode();
        result.put("exit", code);
        result.put("stdout", withoutExits(out.toString(StandardCharsets.UTF_8)));
        result.put("stderr", withoutExits(err.toString(StandardCharsets.UTF_8)));
        return result;
    }
}

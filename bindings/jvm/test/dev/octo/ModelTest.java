package dev.octo;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/** The Java API against octo run's text, and what a caller may get wrong. */
class ModelTest {
    static final String MODEL = System.getProperty("octo.model");
    static final String OCTO = System.getProperty("octo.bin");

    /** What the octo command prints on stdout with args (stderr dropped); it must exit 0. */
    static String octo(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(OCTO));
        cmd.addAll(List.of(args));
        ProcessBuilder b = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD);
        b.environment().remove("LD_PRELOAD"); /* the sanitizer build preloads ASan into the JVM; octo links its own */
        Process p = b.start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (InputStream in = p.getInputStream()) {
            in.transferTo(out);
        }
        assertEquals(0, p.waitFor());
        return out.toString(StandardCharsets.UTF_8);
    }

    /** What `octo run -m MODEL -p PROMPT -n N --temp 0` prints, without run's last newline. */
    static String octoRun(String prompt, int n) throws Exception {
        String s = octo("run", "-m", MODEL, "-p", prompt, "-n", String.valueOf(n), "--temp", "0");
        return s.endsWith("\n") ? s.substring(0, s.length() - 1) : s;
    }

    @Test
    void greedyTextIsOctoRuns() throws Exception {
        try (Model m = Model.load(MODEL)) {
            List<String> pieces = new ArrayList<>();
            try (Stream s = m.generate("Once upon a time", 48, 0f, 0)) {
                for (String piece : s) pieces.add(piece);
                assertEquals(2, s.stopReason()); /* max tokens */
            }
            assertTrue(pieces.size() > 10, "streamed piece by piece: " + pieces.size());
            assertEquals(octoRun("Once upon a time", 48), String.join("", pieces));
        }
    }

    @Test
    void adaptersPerConversation() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("octo-lora");
        String a = dir.resolve("a.gguf").toString(), b = dir.resolve("b.gguf").toString();
        octo("synth", "--lora-for", MODEL, "--rank", "8", "--std", "0.3", "--seed", "1", "-o", a);
        octo("synth", "--lora-for", MODEL, "--rank", "8", "--std", "0.3", "--seed", "2", "-o", b);
        String wantA = octo("run", "-m", MODEL, "-p", "Once upon a time", "-n", "24", "--temp", "0", "--lora", a);
        String wantB = octo("run", "-m", MODEL, "-p", "Once upon a time", "-n", "24", "--temp", "0", "--lora", b);
        wantA = wantA.substring(0, wantA.length() - 1);
        wantB = wantB.substring(0, wantB.length() - 1);
        try (Model m = Model.builder(MODEL).maxSessions(2).load()) {
            String base = m.generate("Once upon a time", 24, 0f, 0).text();
            Adapter la = m.loadAdapter(a), lb = m.loadAdapter(b);
            m.setAdapters(new Adapter[] {la}, new float[] {1f});
            assertEquals(wantA, m.generate("Once upon a time", 24, 0f, 0).text());
            assertNotEquals(base, wantA);
            try (Session s = m.newSession()) {
                s.setAdapters(new Adapter[] {lb}, new float[] {1f});
                assertEquals(wantB, s.generate("Once upon a time", 24, 0f, 0).text());
                s.setAdapters(new Adapter[] {la, lb}, new float[] {0f, 0f});
                assertEquals(base, s.generate("Once upon a time", 24, 0f, 0).text());
            }
            OctoException e = assertThrows(OctoException.class, () -> m.loadAdapter(MODEL));
            assertTrue(e.getMessage().contains("not an adapter"), e.getMessage());
            assertThrows(OctoException.class, () -> m.setAdapters(new Adapter[] {la}, new float[] {1f, 2f}));
            la.close(); /* the model's conversation keeps it */
            assertEquals(wantA, m.generate("Once upon a time", 24, 0f, 0).text());
            assertThrows(IllegalStateException.class, () -> m.setAdapters(new Adapter[] {la}, new float[] {1f}));
            m.setAdapters(new Adapter[] {}, new float[] {});
            assertEquals(base, m.generate("Once upon a time", 24, 0f, 0).text());
        }
    }

    @Test
    void finetuneTrainsStopsAndResumes() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("octo-ft");
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < 12; i++)
            text.append("Once upon a time there was a little cat. The cat liked to play with a red ball.\n");
        java.nio.file.Path data = dir.resolve("train.txt");
        java.nio.file.Files.writeString(data, text.toString());
        String a = dir.resolve("a.gguf").toString(), b = dir.resolve("b.gguf").toString();
        Finetune.Result whole = new Finetune(MODEL, data.toString(), a).steps(6).batch(2).seqLen(32).rank(4)
                .checkpointEvery(2).run();
        assertEquals(6, whole.stepsRun());
        assertTrue(whole.lastLoss() < whole.firstLoss(), whole.firstLoss() + " -> " + whole.lastLoss());
        List<Long> seen = new ArrayList<>();
        OctoException stopped = assertThrows(OctoException.class, () -> new Finetune(MODEL, data.toString(), b)
                .steps(6).batch(2).seqLen(32).rank(4).checkpointEvery(2)
                .progress(s -> { seen.add(s.step()); return s.step() == 3; }).run());
        assertEquals(22, stopped.status(), stopped.getMessage());
        assertEquals(List.of(1L, 2L, 3L), seen);
        Finetune.Result rest = new Finetune(MODEL, data.toString(), b).steps(6).batch(2).seqLen(32).rank(4)
                .checkpointEvery(2).run();
        assertEquals(3, rest.resumedAt());
        assertArrayEquals(java.nio.file.Files.readAllBytes(java.nio.file.Path.of(a)),
                java.nio.file.Files.readAllBytes(java.nio.file.Path.of(b)));
        try (Model m = Model.load(MODEL)) {
            m.loadAdapter(a).close();
        }
        OctoException bad = assertThrows(OctoException.class,
                () -> new Finetune(MODEL, data.toString(), a).targets("qq").run());
        assertEquals(1, bad.status());
        assertTrue(bad.getMessage().contains("unknown target"), bad.getMessage());
        String full = dir.resolve("full.gguf").toString();
        Finetune.Result all = new Finetune(MODEL, data.toString(), full).steps(4).batch(2).seqLen(32)
                .full(true).run();
        assertTrue(all.full() && all.matrices() > 35, all.toString());
        Finetune.Result distilled = new Finetune(full, data.toString(), b).steps(4).batch(2).seqLen(32)
                .distill(MODEL).valid(data.toString()).restart(true).run();
        assertTrue(distilled.full() && distilled.validAfter() < distilled.validBefore(), distilled.toString());
    }

    @Test
    void cancelFromAnotherThread() throws Exception {
        try (Model m = Model.load(MODEL)) {
            Stream s = m.generate("Once upon a time", 100000, 0.8f, 7);
            CountDownLatch first = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    first.await();
                } catch (InterruptedException e) {
                    return;
                }
                s.cancel();
            });
            t.start();
            int n = 0;
            for (String piece : s) {
                n++;
                first.countDown();
            }
            t.join();
            assertEquals(3, s.stopReason()); /* cancelled */
            assertTrue(n >= 1 && n < 100000, "pieces before the cancel: " + n);
        }
    }

    @Test
    void closeTwiceAndUseAfterClose() {
        Model m = Model.load(MODEL);
        Stream s = m.generate("Once", 8, 0f, 0);
        m.close();
        m.close();
        assertThrows(IllegalStateException.class, () -> m.generate("Once", 8, 0f, 0));
        assertThrows(IllegalStateException.class, s::hasNext); /* closed with its model */
        s.close();
    }

    @Test
    void badPathIsOctoException() {
        OctoException e = assertThrows(OctoException.class, () -> Model.load("/nonexistent/model.gguf"));
        assertTrue(e.getMessage().contains("no such file"), e.getMessage());
        assertEquals(4, e.status()); /* OCTO_ERR_NOT_FOUND */
        OctoException opt = assertThrows(OctoException.class, () -> Model.builder(MODEL).contextLength(-5).load());
        assertTrue(opt.getMessage().startsWith("bad model options (n_ctx -5 of 0.."), opt.getMessage());
        assertEquals(1, opt.status()); /* OCTO_ERR_INVALID_ARG */
        OctoException nul = assertThrows(OctoException.class, () -> Model.load("a\0b"));
        assertTrue(nul.getMessage().contains("NUL"), nul.getMessage());
        /* a NUL in the first string, more strings after it: one exception, no JNI call with it pending */
        OctoException nul2 = assertThrows(OctoException.class,
                () -> Model.builder("a\0b").draftModel("d.gguf").device("host").load());
        assertTrue(nul2.getMessage().contains("NUL"), nul2.getMessage());
        try (Model m = Model.load(MODEL)) {
            OctoException g = assertThrows(OctoException.class,
                    () -> m.generate("x\0y", new GenerateOptions().grammar("root ::= \"a\"").jsonSchema("{}")));
            assertTrue(g.getMessage().contains("NUL"), g.getMessage());
            OctoException bad = assertThrows(OctoException.class,
                    () -> m.generate("Once", new GenerateOptions().grammar("root ::= x")));
            assertTrue(bad.getMessage().contains("never defined"), bad.getMessage());
        }
    }

    /** Collects garbage until Model.State.LIVE is want (the Cleaner has run), for at most 20 s. */
    static void awaitLive(int want) throws InterruptedException {
        for (int i = 0; i < 400 && Model.State.LIVE.get() != want; i++) {
            System.gc();
            Thread.sleep(50);
        }
        assertEquals(want, Model.State.LIVE.get(), "native models left to the Cleaner");
    }

    @Test
    void streamOutlivesTheModelTheAppDropped() throws Exception {
        awaitLive(0); /* what other tests left is freed first */
        Stream s = Model.load(MODEL).generate("Once upon a time", 48, 0f, 0); /* the Model dropped at once */
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(20);
        }
        assertEquals(1, Model.State.LIVE.get(), "the stream keeps its model");
        assertEquals(octoRun("Once upon a time", 48), s.text());
        s = null;
        awaitLive(0); /* the stream unreachable: its model's Cleaner frees it */

        /* both dropped mid-generation, never closed: the Cleaners free stream and model, in any order */
        Stream half = Model.load(MODEL).generate("Once upon a time", 1000, 0f, 0);
        for (int i = 0; i < 3; i++) half.next();
        half = null;
        awaitLive(0);
        /* a session and its stream dropped with the model */
        Model m = Model.builder(MODEL).maxSessions(2).load();
        Stream t = m.newSession().generate("Once upon a time", 1000, 0f, 0);
        t.next();
        m = null;
        t = null;
        awaitLive(0);
    }

    @Test
    void builderOptionsReachOcto() {
        try (Model m = Model.builder(MODEL).planOnly(true).contextLength(256).kvBudgetBytes(100000).kvPolicy("snapkv")
                .kvType(Model.KvType.F32).load()) {
            String plan = m.planJson();
            assertTrue(plan.contains("\"n_ctx\": 256,"), plan);
            assertTrue(plan.contains("\"kv_budget_bytes\": 100000,"), plan);
            assertTrue(plan.contains("\"kv_policy\": \"snapkv\","), plan);
            assertTrue(plan.contains("\"kv_full_bytes\": 327680,"), plan); /* F32: 256 tokens, twice F16's 512 */
            OctoException gen = assertThrows(OctoException.class, () -> m.generate("Once", 4, 0f, 0));
            assertEquals(1, gen.status()); /* plan only: generation is OCTO_ERR_INVALID_ARG */
        }
        try (Model m = Model.builder(MODEL).planOnly(true).kvCompress(false).load()) {
            String plan = m.planJson();
            assertTrue(plan.contains("\"kv_compress\": false,"), plan);
            assertTrue(plan.contains("\"kv_full_bytes\": 327680,"), plan); /* unset: F16 and the trained 512 */
        }
        OctoException kv = assertThrows(OctoException.class, () -> Model.builder(MODEL).kvPolicy("nope").load());
        assertTrue(kv.getMessage().startsWith("unknown KV policy 'nope' (default, none, window, h2o, snapkv, morphkv, speckv"), kv.getMessage());
        assertEquals(1, kv.status());
        OctoException moe = assertThrows(OctoException.class, () -> Model.builder(MODEL).moePolicy("lru2").load());
        assertTrue(moe.getMessage().startsWith("unknown expert cache policy 'lru2'"), moe.getMessage());
        OctoException bits = assertThrows(OctoException.class, () -> Model.builder(MODEL).kvColdBits(5).load());
        assertTrue(bits.getMessage().equals("KV cold_bits must be 4, 8 or 16, not 5"), bits.getMessage());
        OctoException share = assertThrows(OctoException.class, () -> Model.builder(MODEL).moeCacheShare(1.5).load());
        assertTrue(share.getMessage().equals("moe.cache_share 1.5 is not a share between 0 and 1"), share.getMessage());
        OctoException nul = assertThrows(OctoException.class, () -> Model.builder(MODEL).draftModel("d\0.gguf").device("host").load());
        assertTrue(nul.getMessage().contains("NUL"), nul.getMessage());
    }

    @Test
    void loadsADeployBundle() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("octo-bundle");
        octo("deploy", "-m", MODEL, "--device", "host,pixel-8", "-o", dir.toString(), "--quiet");
        try (Model m = Model.load(dir.toString())) { /* the host's folder */
            assertTrue(m.planJson().contains("\"device\": \"host\","));
            assertEquals(octoRun("Once upon a time", 32), m.generate("Once upon a time", 32, 0f, 0).text());
        }
        try (Model m = Model.builder(dir.toString()).device("pixel-8").load()) {
            assertTrue(m.planJson().contains("\"device\": \"pixel-8\","), m.planJson());
        }
        OctoException none = assertThrows(OctoException.class, () -> Model.builder(dir.toString()).device("galaxy-s24").load());
        assertTrue(none.getMessage().contains("galaxy-s24"), none.getMessage());
        try (java.util.stream.Stream<java.nio.file.Path> all = java.nio.file.Files.walk(dir)) {
            all.sorted(java.util.Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
        }
    }

    /** The ids `octo tokenize` prints for text. */
    static int[] octoTokenize(String text) throws Exception {
        String out = octo("tokenize", "-m", MODEL, "--text", text).trim();
        return java.util.Arrays.stream(out.split(" ")).mapToInt(Integer::parseInt).toArray();
    }

    @Test
    void tokenizeWithTheVocabularyOnly() throws Exception {
        String text = "Once upon a time, a cat saw the sun.";
        try (Model v = Model.builder(MODEL).vocabOnly(true).load(); Model m = Model.load(MODEL)) {
            int[] ids = v.tokenize(text);
            assertArrayEquals(octoTokenize(text), ids);
            assertArrayEquals(ids, m.tokenize(text));
            assertEquals("a\0b", v.detokenize(v.tokenize("a\0b"))); /* a NUL is text to octo_tokenize, which takes a length */
            assertEquals(text, v.detokenize(ids));
            assertEquals("", v.detokenize(new int[0]));
            OctoException bad = assertThrows(OctoException.class, () -> v.detokenize(new int[] {1, 99999}));
            assertEquals(1, bad.status(), bad.getMessage());
            assertThrows(OctoException.class, () -> v.generate("Once", 4, 0f, 0)); /* no weights */
        }
    }

    @Test
    void closeStopsACallbackGeneration() throws Exception {
        Model m = Model.load(MODEL);
        CountDownLatch first = new CountDownLatch(1);
        int[] pieces = {0};
        Throwable[] ended = {null};
        Thread t = new Thread(() -> {
            try {
                m.generate("Once upon a time", 100000, 0.8f, 7, p -> {
                    pieces[0]++;
                    first.countDown();
                });
            } catch (Throwable e) {
                ended[0] = e;
            }
        });
        t.start();
        first.await();
        m.close(); /* from another thread: the generation stops before its next piece, then the model goes */
        t.join(20000);
        assertFalse(t.isAlive());
        assertTrue(pieces[0] >= 1 && pieces[0] < 100000, "pieces: " + pieces[0]);
        assertTrue(ended[0] instanceof IllegalStateException, String.valueOf(ended[0])); /* cut, not finished */
        assertEquals("the model was closed during the generation", ended[0].getMessage());
        assertThrows(IllegalStateException.class, () -> m.generate("Once", 4, 0f, 0));

        try (Model n = Model.load(MODEL)) { /* close() inside its own callback: an error, not a deadlock */
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> n.generate("Once upon a time", 50, 0f, 0, p -> n.close()));
            assertTrue(e.getMessage().contains("inside this model's own callback"), e.getMessage());
            assertEquals(octoRun("Once upon a time", 8), n.generate("Once upon a time", 8, 0f, 0).text()); /* still open */
        }
    }

    @Test
    void nonAsciiInOctosMessages() {
        OctoException e = assertThrows(OctoException.class, () -> Model.load("/nonexistent/caf\u00e9-\ud83d\ude00.gguf"));
        assertTrue(e.getMessage().contains("caf\u00e9-\ud83d\ude00.gguf"), e.getMessage()); /* UTF-8, not modified UTF-8 */
    }

    @Test
    void warningsReachTheLog() throws Exception {
        List<String> seen = new ArrayList<>();
        try (Model m = Model.builder(MODEL).contextLength(2048).log((level, text) -> seen.add(level + " " + text)).load()) {
            assertEquals(1, seen.size(), seen.toString());
            assertTrue(seen.get(0).startsWith("2 context 2048 tokens is past the model's trained 512"), seen.get(0));
            assertEquals(octoRun("Once upon a time", 8), m.generate("Once upon a time", 8, 0f, 0).text());
        }
        /* a sink that throws: the exception is dropped, the load goes on */
        try (Model m = Model.builder(MODEL).contextLength(2048).log((level, text) -> {
            throw new IllegalStateException("the app's bug");
        }).load()) {
            assertEquals(octoRun("Once upon a time", 8), m.generate("Once upon a time", 8, 0f, 0).text());
        }
    }

    @Test
    void callbackThatThrowsStopsTheGeneration() {
        try (Model m = Model.load(MODEL)) {
            Stream s = m.generate("Once upon a time", 1000, 0f, 0);
            int[] seen = {0};
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> s.forEachPiece(p -> {
                if (++seen[0] == 3) throw new IllegalArgumentException("enough");
            }));
            assertEquals("enough", e.getMessage());
            assertEquals(3, seen[0]);
            assertThrows(IllegalStateException.class, s::hasNext); /* closed by the failure */
            /* the model is still usable */
            try (Stream again = m.generate("Once upon a time", 8, 0f, 0)) {
                assertFalse(again.text().isEmpty());
            }
        }
    }

    @Test
    void fourSessionsOnFourThreads() throws Exception {
        String want = octoRun("Once upon a time", 32);
        try (Model m = Model.builder(MODEL).maxSessions(5).load()) {
            String[] got = new String[4];
            Thread[] t = new Thread[4];
            for (int i = 0; i < 4; i++) {
                final int k = i;
                t[i] = new Thread(() -> {
                    try (Session s = m.newSession()) {
                        got[k] = s.generate("Once upon a time", new GenerateOptions().maxTokens(32).temperature(0)).text();
                    }
                });
                t[i].start();
            }
            for (Thread x : t) x.join();
            for (int i = 0; i < 4; i++) assertEquals(want, got[i], "session " + i);
        }
    }

    @Test
    void grammarAndTrim() {
        try (Model m = Model.load(MODEL)) {
            String text = m.generate("Once upon a time", new GenerateOptions().maxTokens(16).temperature(1f).seed(3)
                    .grammar("root ::= \"The \" (\"cat\" | \"dog\") \".\"")).text();
            assertTrue(text.equals("The cat.") || text.equals("The dog."), text);
            m.trim(5); /* RUNNING_MODERATE */
            m.trim(80); /* COMPLETE */
            m.trim(0);
            assertThrows(IllegalArgumentException.class, () -> m.trim(7));
            assertFalse(m.generate("Once", 4, 0f, 0).text().isEmpty());
        }
    }

    @Test
    void statsAreTheHeadersList() throws Exception {
        /* every line of OCTO_STATS, in order, is a component of the record, its name in camelCase */
        List<String> names = new ArrayList<>();
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of(System.getProperty("octo.header")))) {
            java.util.regex.Matcher x = java.util.regex.Pattern.compile("^\\s+(?:NUM|TEXT)\\(\\w+, \\w+, (\\w+),").matcher(line);
            if (x.find()) names.add(java.util.regex.Pattern.compile("_(\\w)").matcher(x.group(1)).replaceAll(r -> r.group(1).toUpperCase()));
        }
        java.lang.reflect.RecordComponent[] rc = Stats.class.getRecordComponents();
        assertTrue(names.size() > 100, "OCTO_STATS read: " + names.size());
        assertEquals(names.size(), rc.length);
        for (int i = 0; i < rc.length; i++) assertEquals(names.get(i), rc[i].getName());
        try (Model m = Model.builder(MODEL).maxSessions(2).load()) {
            m.generate("Once upon a time", 24, 0f, 0).text();
            Stats s = m.stats();
            assertEquals(24, s.decodeTokens());
            assertTrue(s.promptTokens() >= 4 && s.decodeTokensPerS() > 0 && s.rssBytes() > 0, s.toString());
            assertEquals("plain", s.chatTemplate());
            try (Session ss = m.newSession()) {
                ss.generate("Once", new GenerateOptions().maxTokens(5).temperature(0)).text();
                assertEquals(5, ss.stats().decodeTokens());
            }
        }
    }

    @Test
    void nativeCallbackThatThrows() throws Exception {
        try (Model m = Model.load(MODEL)) {
            StringBuilder all = new StringBuilder();
            m.generate("Once upon a time", 48, 0f, 0, all::append);
            assertEquals(octoRun("Once upon a time", 48), all.toString());
            int[] seen = {0};
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> m.generate("Once upon a time",
                    1000, 0f, 0, p -> {
                        if (++seen[0] == 2) throw new IllegalStateException("stop here");
                    }));
            assertEquals("stop here", e.getMessage());
            assertEquals(2, seen[0]); /* no piece after the throw */
            long made = m.stats().decodeTokens();
            assertTrue(made >= 2 && made < 10, "tokens made before the stop: " + made); /* stopped, not run to 1000 */
            assertFalse(m.generate("Once", 4, 0f, 0).text().isEmpty());
        }
    }

    /** Issue 54's red team: null arguments and ids out of the vocabulary are exceptions, never a crash of the JVM. */
    @Test
    void nullsAndBadIdsAreExceptions() throws Exception {
        assertThrows(NullPointerException.class, () -> Model.load(null));
        try (Model m = Model.load(MODEL)) {
            assertThrows(NullPointerException.class, () -> m.generate(null, 4, 0f, 0));
            assertThrows(NullPointerException.class, () -> m.generate("Once", (GenerateOptions) null));
            assertThrows(NullPointerException.class, () -> m.generate("Once", 4, 0f, 0, null));
            assertThrows(NullPointerException.class, () -> m.tokenize(null));
            assertThrows(OctoException.class, () -> m.detokenize(null));
            assertThrows(OctoException.class, () -> m.detokenize(new int[] {-1, 1 << 30}));
            assertThrows(IllegalArgumentException.class, () -> m.trim(7));
            assertEquals(octoRun("Once", 8), m.generate("Once", 8, 0f, 0).text()); /* and the model still works */
        }
    }

    /** Eight threads at one model at once: one stream runs at a time, the others are told BUSY (an
     *  OctoException, status 21: OCTO_ERR_BUSY), and every text that runs is octo run's. */
    @Test
    void eightThreadsAtOneModel() throws Exception {
        String want = octoRun("Once", 6);
        try (Model m = Model.load(MODEL)) {
            java.util.concurrent.atomic.AtomicInteger ran = new java.util.concurrent.atomic.AtomicInteger(), busy =
                    new java.util.concurrent.atomic.AtomicInteger();
            List<String> wrong = java.util.Collections.synchronizedList(new ArrayList<>());
            List<Thread> ts = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                Thread t = new Thread(() -> {
                    for (int k = 0; k < 20; k++) {
                        try (Stream st = m.generate("Once", 6, 0f, 0)) {
                            String got = st.text();
                            if (!got.equals(want)) wrong.add(got);
                            ran.incrementAndGet();
                        } catch (OctoException e) {
                            if (e.status() != 21) wrong.add(e.getMessage());
                            busy.incrementAndGet();
                        } catch (Throwable e) {
                            wrong.add(e.toString());
                        }
                    }
                });
                ts.add(t);
                t.start();
            }
            for (Thread t : ts) t.join();
            assertEquals(List.of(), wrong);
            assertEquals(160, ran.get() + busy.get());
            assertTrue(ran.get() > 0, "no stream ran");
        }
    }

    /** Issue 59, 9: the calls that report through the model's error, beside the model's own stream on
     *  another thread, each keep their own message (a start is BUSY "serving a stream", a bad id's
     *  detokenize names it, a session past max_sessions says so) while tokenize, detokenize and
     *  planJson answer; before, a detokenize cleared a failed start's message as it was read. */
    @Test
    void callsBesideAStreamKeepTheirMessages() throws Exception {
        try (Model m = Model.builder(MODEL).maxSessions(1).load()) {
            final int[] ids = m.tokenize("Once upon a time");
            final String plan = m.planJson();
            java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            List<String> wrong = java.util.Collections.synchronizedList(new ArrayList<>());
            Thread streamer = new Thread(() -> {
                while (!stop.get()) {
                    try (Stream st = m.generate("Once", 64, 0f, 0)) {
                        st.text();
                    } catch (OctoException e) { /* the other thread's start won the model */
                        if (e.status() != 21 || !e.getMessage().contains("serving a stream")) wrong.add("streamer: " + e);
                    }
                }
            });
            streamer.start();
            int busy = 0;
            for (int i = 0; i < 30000 && wrong.isEmpty(); i++) {
                try (Stream st = m.generate("Once", 1, 0f, 0)) {
                    st.text(); /* the streamer was between two streams */
                } catch (OctoException e) {
                    if (e.status() != 21 || !e.getMessage().contains("serving a stream")) wrong.add("generate: " + e);
                    busy++;
                }
                Throwable d = assertThrows(OctoException.class, () -> m.detokenize(new int[] {1 << 30}));
                if (!d.getMessage().contains("outside the vocabulary")) wrong.add("detokenize: " + d);
                if ((i & 15) == 0) {
                    Throwable s = assertThrows(OctoException.class, m::newSession);
                    if (!s.getMessage().contains("sessions are open")) wrong.add("newSession: " + s);
                    if (!m.planJson().equals(plan)) wrong.add("planJson changed");
                }
                if (!java.util.Arrays.equals(ids, m.tokenize("Once upon a time"))) wrong.add("tokenize");
                if (m.detokenize(ids).isEmpty()) wrong.add("detokenize: empty");
            }
            stop.set(true);
            streamer.join();
            assertEquals(List.of(), wrong);
            assertTrue(busy > 1000, "the stream was rarely running: " + busy);
        }
    }

    @Test
    void textKeepsUtf8() throws Exception {
        try (Model m = Model.load(MODEL)) {
            String prompt = "Émile saw a 🐙";
            assertEquals(octoRun(prompt, 16), m.generate(prompt, 16, 0f, 0).text());
        }
    }
}

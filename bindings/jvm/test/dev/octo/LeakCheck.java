package dev.octo;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * 1000 cycles of load, generate, close in one JVM: the process's resident memory (native and
 * JVM) and the JVM's heap after a collection, at half the cycles and at the end, must stay flat (the first half warms the JIT).
 * usage: LeakCheck MODEL [CYCLES]; prints both figures; exit 1 when either grew past 16 MiB.
 */
public final class LeakCheck {
    static long rssKib() throws Exception {
        for (String l : Files.readAllLines(Path.of("/proc/self/status")))
            if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", ""));
        return -1;
    }

    static long heapKib() {
        Runtime r = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) System.gc();
        return (r.totalMemory() - r.freeMemory()) / 1024;
    }

    public static void main(String[] args) throws Exception {
        String model = args[0];
        int cycles = args.length > 1 ? Integer.parseInt(args[1]) : 1000;
        long rss0 = 0, heap0 = 0;
        for (int i = 1; i <= cycles; i++) {
            try (Model m = Model.builder(model).threads(1).load();
                 Stream s = m.generate("Once upon a time", 8, 0f, 0)) {
                if (s.text().isEmpty()) throw new AssertionError("no text at cycle " + i);
            }
            if (i == cycles / 2) {
                rss0 = rssKib();
                heap0 = heapKib();
            }
        }
        long rss1 = rssKib(), heap1 = heapKib();
        System.out.printf("LeakCheck: %d cycles; RSS %d KiB at cycle %d, %d KiB at the end (%+d); heap %d KiB, %d KiB (%+d)%n",
                cycles, rss0, cycles / 2, rss1, rss1 - rss0, heap0, heap1, heap1 - heap0);
        boolean flat = rss1 - rss0 < 16 * 1024 && heap1 - heap0 < 16 * 1024;
        System.exit(flat ? 0 : 1);
    }
}

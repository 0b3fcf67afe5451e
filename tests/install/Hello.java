// Hello.java — the JVM binding as installed (tests/install.sh): octo.jar from share/java, liboctojni.so
// from the library folder (java.library.path), which finds libocto.so.0 beside it. Prints the greedy
// text of 8 tokens, as `octo run -n 8 --temp 0` does.
import dev.octo.GenerateOptions;
import dev.octo.Model;
import dev.octo.Stream;

public final class Hello {
    public static void main(String[] args) throws Exception {
        try (Model model = Model.builder(args[0]).load();
             Stream stream = model.generate("Once upon a time", new GenerateOptions().maxTokens(8).temperature(0f))) {
            StringBuilder text = new StringBuilder();
            for (String piece : stream) text.append(piece);
            System.out.println(text);
        }
    }
}

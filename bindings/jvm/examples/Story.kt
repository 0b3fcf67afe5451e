// Story.kt — octo from Kotlin: a model loaded, a story streamed piece by piece, the figures after.
// Built with Debian's kotlinc against octo.jar and run by tests/jvm.sh (ctest jvm_kotlin):
//   kotlinc Story.kt -cp octo.jar -d story.jar
//   java -Docto.jni=liboctojni.so -cp octo.jar:story.jar:KOTLIN_STDLIB StoryKt MODEL PROMPT
import dev.octo.GenerateOptions
import dev.octo.Model

fun main(args: Array<String>) {
    val path = args.getOrElse(0) { "stories260K.gguf" }
    val prompt = args.getOrElse(1) { "Once upon a time" }
    Model.builder(path).contextLength(512).load().use { model ->
        model.generate(prompt, GenerateOptions().maxTokens(48).temperature(0f)).use { stream ->
            for (piece in stream) print(piece)
        }
        println()
        val s = model.stats()
        System.err.println("${s.decodeTokens()} tokens at %.1f tokens/s".format(s.decodeTokensPerS()))
    }
}

/*
 * test_chat_template — each recognised template family is detected from its
 * markers and formats a conversation exactly as its model card documents;
 * anything else is a plain prompt.
 */
#include "model/chat_template.h"
#include "t.h"
#include "util.h"

static const chat_message conv[] = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Why?"}};

static void check(chat_family f, const char *want) {
    char *got = NULL;
    T_EQ_INT(chat_format(f, conv, 4, &got, NULL), ERR_OK);
    T_CHECKF(got && !strcmp(got, want), "%s:\n got: %s\nwant: %s", chat_family_name(f), got ? got : "(null)", want);
    free(got);
}

static chat_family detect(const char *s) { return chat_detect(s, strlen(s)); }

int main(void) {
    /* detection from fragments of real templates */
    T_EQ_INT(detect("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'}}"), CHAT_CHATML);
    T_EQ_INT(detect("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"), CHAT_LLAMA3);
    T_EQ_INT(detect("{{ bos_token + '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}"), CHAT_LLAMA2);
    T_EQ_INT(detect("{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"), CHAT_MISTRAL);
    T_EQ_INT(detect("{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>'}}"), CHAT_PHI3);
    T_EQ_INT(detect("{{ '<|user|>\\n' + message['content'] + eos_token }}"), CHAT_ZEPHYR);
    T_EQ_INT(detect("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"), CHAT_GEMMA);
    T_EQ_INT(detect("{{'<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>'}}"),
             CHAT_GRANITE);
    T_EQ_INT(detect("{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}"),
             CHAT_DEEPSEEK2);
    T_EQ_INT(detect("{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '\\n' }}"), CHAT_TULU);
    T_EQ_INT(detect("{{ messages | tojson }}"), CHAT_PLAIN);
    T_EQ_INT(chat_detect(NULL, 0), CHAT_PLAIN);

    check(CHAT_CHATML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
                       "<|im_start|>assistant\n");
    check(CHAT_LLAMA3, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check(CHAT_LLAMA2, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello.</s><s>[INST] Why? [/INST]");
    check(CHAT_MISTRAL, "[INST] Be brief.\n\nHi [/INST] Hello.</s><s>[INST] Why? [/INST]");
    check(CHAT_PHI3, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n"
                     "<|user|>\nWhy?<|end|>\n<|assistant|>\n");
    check(CHAT_ZEPHYR, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n"
                       "<|user|>\nWhy?</s>\n<|assistant|>\n");
    check(CHAT_GEMMA, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
                      "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n");
    check(CHAT_PLAIN, "Be brief.\n\nHi\n\nHello.\n\nWhy?");
    check(CHAT_GRANITE, "<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n"
                        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
                        "<|start_of_role|>assistant<|end_of_role|>Hello.<|end_of_text|>\n"
                        "<|start_of_role|>user<|end_of_role|>Why?<|end_of_text|>\n"
                        "<|start_of_role|>assistant<|end_of_role|>");
    check(CHAT_DEEPSEEK2, "Be brief.\n\nUser: Hi\n\nAssistant: Hello.<｜end▁of▁sentence｜>"
                          "User: Why?\n\nAssistant:");
    check(CHAT_TULU, "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello.<|endoftext|>\n<|user|>\nWhy?\n"
                     "<|assistant|>\n");

    /* bad messages are errors */
    chat_message bad = {"wizard", "x"};
    char *out = NULL;
    err_t err = {0};
    T_EQ_INT(chat_format(CHAT_CHATML, &bad, 1, &out, &err), ERR_INVALID_ARG);
    T_CHECK(out == NULL && strstr(err.msg, "role"));
    chat_message null_content = {"user", NULL};
    T_EQ_INT(chat_format(CHAT_CHATML, &null_content, 1, &out, &err), ERR_INVALID_ARG);
    T_DONE();
}

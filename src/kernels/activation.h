/* The feed-forward activation kinds (HuggingFace's hidden_act): named by a model's
 * configuration (model/config.h), computed by the backend (kernels/kernels.h). A header of
 * its own, with nothing else in it, so that the configuration and its readers name an
 * activation without the backend's interface. */
#ifndef BERT_KERNELS_ACTIVATION_H
#define BERT_KERNELS_ACTIVATION_H

typedef enum {
    ACT_GELU,      /* "gelu": exact, 0.5 x (1 + erf(x / sqrt 2)) */
    ACT_GELU_NEW,  /* "gelu_new" / "gelu_pytorch_tanh": tanh approximation */
} Activation;

#endif

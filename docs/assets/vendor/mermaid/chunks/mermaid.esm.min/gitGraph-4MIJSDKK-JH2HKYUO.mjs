import{a as r,b as e}from"./chunk-ZUNWM646.mjs";import"./chunk-ZS6VBONO.mjs";import"./chunk-AQ6EADP3.mjs";export{r as GitGraphModule,e as createGitGraphServices};

import{a as e,b as r}from"./chunk-3SMGFRGC.mjs";import"./chunk-ZS6VBONO.mjs";import"./chunk-AQ6EADP3.mjs";export{e as WardleyModule,r as createWardleyServices};
